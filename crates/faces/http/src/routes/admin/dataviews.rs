//! DataViews: drafts, publishing and previews.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{DataEnvelope, DataView, DataViewPreview, DataViewRequest, ErrorEnvelope};
use serde_json::{Map, Value};
use uuid::Uuid;
use views::store::DataViewRecord;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data, LazyCaller};
use crate::respond::{created, no_content, ok};

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
    let rows: Value = serde_json::from_str(&preview.rows)
        .map_err(|_| ApiError::new(kernel::Code::Internal, "Internal error"))?;
    Ok(ok(DataViewPreview {
        sql: preview.sql,
        params: preview.params,
        rows,
    }))
}
