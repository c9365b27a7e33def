//! DataViews: drafts, publishing and previews.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{DataEnvelope, DataView, DataViewPreview, DataViewRequest, ErrorEnvelope};
use data::RoleSubject;
use kernel::Code;
use kernel::validate::TimeZoneName;
use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;
use views::store::DataViewRecord;
use views::{Preview, PreviewAs};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data, LazyCaller};
use crate::respond::{created, json_data, no_content, ok};

fn dataview(record: DataViewRecord) -> DataView {
    let draft = |key: &str| record.draft.get(key).cloned().unwrap_or(Value::Null);
    DataView {
        source: draft("source"),
        columns: draft("columns"),
        filter: draft("filter"),
        sort: draft("sort"),
        limit: draft("limit"),
        id: record.id,
        slug: record.slug,
        name: record.name,
        published: record.published.is_some(),
        published_at: record.published_at,
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

/// Every DataView, by name.
#[utoipa::path(tag = "dataviews", operation_id = "listDataViews", security(("bearer" = [])),
    responses((status = 200, description = "The DataViews", body = inline(DataEnvelope<Vec<DataView>>))))]
#[get("/dataviews")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let all = state.services.views.list().await?;
    Ok(ok(all.into_iter().map(dataview).collect::<Vec<_>>()))
}

/// Creates a DataView's draft, checked against its source (publish it to serve it).
#[utoipa::path(tag = "dataviews", operation_id = "createDataView", security(("bearer" = [])),
    request_body = inline(DataEnvelope<DataViewRequest>),
    responses((status = 201, description = "The DataView", body = inline(DataEnvelope<DataView>)),
        (status = 400, description = "Invalid definition", body = ErrorEnvelope),
        (status = 409, description = "Slug taken", body = ErrorEnvelope)))]
#[post("/dataviews")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .views
        .create(&caller.principal, &body.0, caller.ip())
        .await?;
    Ok(created(dataview(record)))
}

/// One DataView (its draft, and whether it is published).
#[utoipa::path(tag = "dataviews", operation_id = "getDataView", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The DataView", body = inline(DataEnvelope<DataView>)),
        (status = 404, description = "No such DataView", body = ErrorEnvelope)))]
#[get("/dataviews/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(dataview(
        state.services.views.get(id.into_inner()).await?,
    )))
}

/// Changes the given fields of the draft, name or slug; what
/// `/api/views/{slug}` serves changes only at the next publish.
#[utoipa::path(tag = "dataviews", operation_id = "updateDataView", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = inline(DataEnvelope<DataViewRequest>),
    responses((status = 200, description = "The DataView", body = inline(DataEnvelope<DataView>)),
        (status = 400, description = "Invalid definition", body = ErrorEnvelope),
        (status = 404, description = "No such DataView", body = ErrorEnvelope),
        (status = 409, description = "Slug taken", body = ErrorEnvelope)))]
#[patch("/dataviews/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .views
        .update(&caller.principal, id.into_inner(), &body.0, caller.ip())
        .await?;
    Ok(ok(dataview(record)))
}

/// Deletes a DataView with its grants.
#[utoipa::path(tag = "dataviews", operation_id = "deleteDataView", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such DataView", body = ErrorEnvelope)))]
#[delete("/dataviews/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .views
        .delete(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}

/// Serves a snapshot of the draft at `/api/views/{slug}`.
#[utoipa::path(tag = "dataviews", operation_id = "publishDataView", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The DataView", body = inline(DataEnvelope<DataView>)),
        (status = 400, description = "The draft no longer fits its source", body = ErrorEnvelope),
        (status = 404, description = "No such DataView", body = ErrorEnvelope)))]
#[post("/dataviews/{id}/publish")]
pub async fn publish(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .views
        .publish(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(ok(dataview(record)))
}

/// Runs the draft as the calling administrator: the SQL that ran, its
/// bound values and its rows. Nothing is changed.
#[utoipa::path(tag = "dataviews", operation_id = "previewDataView", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The statement and its rows", body = inline(DataEnvelope<DataViewPreview>)),
        (status = 400, description = "The draft no longer fits its source", body = ErrorEnvelope),
        (status = 404, description = "No such DataView", body = ErrorEnvelope)))]
#[post("/dataviews/{id}/preview")]
pub async fn preview(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    caller: LazyCaller,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let preview = state
        .services
        .views
        .preview(caller.request(), id.into_inner())
        .await?;
    preview_answer(preview)
}

/// Who a definition's preview reads as.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct PreviewQuery {
    /// Read as a member of this role alone (its read grants on the source
    /// apply); none: as the administrator calling.
    role_id: Option<Uuid>,
    /// The user `$USER` stands for in a role's preview (none: nobody).
    user_id: Option<Uuid>,
    /// The IANA time zone buckets and `$PERIOD` are cut in.
    zone: Option<String>,
}

/// Runs a definition, saved or not (the console's builder as it is
/// edited), as the administrator or a member of a role: the SQL that ran,
/// its bound values and its rows. The definition is checked as a save
/// checks it; nothing is changed or audited.
#[utoipa::path(tag = "dataviews", operation_id = "previewDataViewDefinition", security(("bearer" = [])), params(PreviewQuery),
    request_body = inline(DataEnvelope<DataViewRequest>),
    responses((status = 200, description = "The statement and its rows", body = inline(DataEnvelope<DataViewPreview>)),
        (status = 400, description = "Invalid definition or zone", body = ErrorEnvelope),
        (status = 403, description = "The role may not read the source", body = ErrorEnvelope),
        (status = 404, description = "No such role", body = ErrorEnvelope)))]
#[post("/dataviews/preview")]
pub async fn preview_definition(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    caller: LazyCaller,
    query: web::Query<PreviewQuery>,
    body: Data<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let zone = query
        .zone
        .map(|zone| {
            TimeZoneName::parse(&zone, "zone")
                .map_err(|e| ApiError::field(Code::InvalidQuery, "zone", e.message))
        })
        .transpose()?;
    let role = match query.role_id {
        Some(id) => {
            let role = state.services.roles.role(id).await?;
            Some(RoleSubject {
                id: role.id,
                api_access: role.api_access,
            })
        }
        None => None,
    };
    let who = PreviewAs {
        role,
        user: query.user_id,
        zone,
    };
    let ran = state
        .services
        .views
        .preview_definition(caller.request(), &body.0, &who)
        .await?;
    preview_answer(ran)
}

/// A preview's answer: its statement and values, and its rows as
/// PostgreSQL wrote them (not parsed again, so no number is rounded).
fn preview_answer(ran: Preview) -> Result<HttpResponse, ApiError> {
    let head = serde_json::to_string(&serde_json::json!({ "sql": ran.sql, "params": ran.params }))
        .map_err(|_| ApiError::new(Code::Internal, "Internal error"))?;
    // `head` is an object: its closing brace makes room for the rows.
    let data = format!("{},\"rows\":{}}}", &head[..head.len() - 1], ran.rows);
    Ok(json_data(StatusCode::OK, &data))
}
