//! Dashboards: widgets over DataViews on a 12-column grid.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{DashboardRequest, DataEnvelope, ErrorEnvelope};
use serde_json::{Map, Value};
use uuid::Uuid;
use views::store::DashboardRecord;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};

/// The dashboard as the Admin API shows it.
pub(crate) fn dashboard(record: DashboardRecord) -> api_types::Dashboard {
    api_types::Dashboard {
        id: record.id,
        slug: record.slug,
        name: record.name,
        refresh_seconds: record.refresh_seconds,
        widgets: record.widgets,
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

/// Every dashboard, by name.
#[utoipa::path(tag = "dashboards", operation_id = "listDashboards", security(("bearer" = [])),
    responses((status = 200, description = "The dashboards", body = inline(DataEnvelope<Vec<api_types::Dashboard>>))))]
#[get("/dashboards")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let all = state.services.views.dashboards().await?;
    Ok(ok(all.into_iter().map(dashboard).collect::<Vec<_>>()))
}

/// Creates a dashboard; each widget's `x` and `y` name output columns of its DataView.
#[utoipa::path(tag = "dashboards", operation_id = "createDashboard", security(("bearer" = [])),
    request_body = inline(DataEnvelope<DashboardRequest>),
    responses((status = 201, description = "The dashboard", body = inline(DataEnvelope<api_types::Dashboard>)),
        (status = 400, description = "Invalid dashboard", body = ErrorEnvelope),
        (status = 409, description = "Slug taken", body = ErrorEnvelope)))]
#[post("/dashboards")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .views
        .create_dashboard(&caller.principal, &body.0, caller.ip())
        .await?;
    Ok(created(dashboard(record)))
}

/// One dashboard.
#[utoipa::path(tag = "dashboards", operation_id = "getDashboard", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The dashboard", body = inline(DataEnvelope<api_types::Dashboard>)),
        (status = 404, description = "No such dashboard", body = ErrorEnvelope)))]
#[get("/dashboards/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(dashboard(
        state.services.views.dashboard(id.into_inner()).await?,
    )))
}

/// Changes the given fields.
#[utoipa::path(tag = "dashboards", operation_id = "updateDashboard", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = inline(DataEnvelope<DashboardRequest>),
    responses((status = 200, description = "The dashboard", body = inline(DataEnvelope<api_types::Dashboard>)),
        (status = 400, description = "Invalid dashboard", body = ErrorEnvelope),
        (status = 404, description = "No such dashboard", body = ErrorEnvelope),
        (status = 409, description = "Slug taken", body = ErrorEnvelope)))]
#[patch("/dashboards/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .views
        .update_dashboard(&caller.principal, id.into_inner(), &body.0, caller.ip())
        .await?;
    Ok(ok(dashboard(record)))
}

/// Deletes a dashboard.
#[utoipa::path(tag = "dashboards", operation_id = "deleteDashboard", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such dashboard", body = ErrorEnvelope)))]
#[delete("/dashboards/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .views
        .delete_dashboard(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}
