//! Published DataViews and dashboards, read under the caller's grants.

use actix_web::{HttpResponse, get, web};
use api_types::{DashboardSummary, DataEnvelope, ErrorEnvelope, ResolvedDashboard};
use data::ListParams;
use kernel::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::LazyCaller;
use crate::respond::{json_page, ok};

/// The query parameters of a view read.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewQuery {
    /// A JSON filter over the view's output columns.
    filter: Option<String>,
    /// Output columns, comma separated; `-` before one for descending (default: the view's sort).
    sort: Option<String>,
    /// Page size, 1 to 1000 (default: the view's limit up to 1000, else 100).
    limit: Option<String>,
    /// Rows to skip (default 0).
    offset: Option<String>,
    /// `exact` adds `meta.total`.
    count: Option<String>,
}

/// A published DataView's output: `{ data: [row], meta: { limit, offset, total? } }`.
/// Needs a read grant on the view and on its source; bucket values are
/// timestamps with the caller's offset.
#[utoipa::path(operation_id = "readView", tag = "views", security(("bearer" = [])),
    params(("slug" = String, Path), ViewQuery),
    responses((status = 200, description = "{ data: [row], meta }"), (status = 400, body = ErrorEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[get("/{slug}")]
pub async fn read(
    state: web::Data<AppState>,
    caller: LazyCaller,
    slug: web::Path<String>,
    query: web::Query<ViewQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let given = |value: Option<String>| value.filter(|v| !v.is_empty());
    let params = ListParams {
        select: None,
        filter: given(q.filter),
        sort: given(q.sort),
        limit: given(q.limit),
        offset: given(q.offset),
        count: given(q.count),
        ..ListParams::default()
    };
    let page = state
        .services
        .views
        .read(caller.request(), &slug, &params)
        .await?;
    Ok(json_page(page))
}

/// The dashboards the caller may read something on (administrators: all).
#[utoipa::path(operation_id = "listReadableDashboards", tag = "views", security(("bearer" = [])),
    responses((status = 200, description = "The dashboards", body = inline(DataEnvelope<Vec<DashboardSummary>>)),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope)))]
#[get("")]
pub async fn dashboards(
    state: web::Data<AppState>,
    caller: LazyCaller,
) -> Result<HttpResponse, ApiError> {
    let all = state
        .services
        .views
        .readable_dashboards(caller.request())
        .await?;
    Ok(ok(all
        .into_iter()
        .map(|d| DashboardSummary {
            id: d.id,
            slug: d.slug,
            name: d.name,
        })
        .collect::<Vec<_>>()))
}

/// A dashboard with each widget's rows read under the caller's
/// permissions; a widget whose view the caller may not read carries
/// `error: { code: "PERMISSION_DENIED" }` instead of rows.
#[utoipa::path(operation_id = "readDashboard", tag = "views", security(("bearer" = [])), params(("slug" = String, Path)),
    responses((status = 200, description = "The dashboard", body = inline(DataEnvelope<ResolvedDashboard>)),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[get("/{slug}")]
pub async fn dashboard(
    state: web::Data<AppState>,
    caller: LazyCaller,
    slug: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let resolved = state
        .services
        .views
        .resolve(caller.request(), &slug)
        .await?;
    let widgets = resolved
        .widgets
        .into_iter()
        .map(|w| {
            let mut widget = w.widget.to_json();
            let (key, value) = match w.rows {
                Ok(rows) => (
                    "rows",
                    serde_json::from_str(&rows).unwrap_or(Value::Array(Vec::new())),
                ),
                Err(e) => (
                    "error",
                    json!({ "code": e.code().as_str(), "message": e.message() }),
                ),
            };
            if let Some(object) = widget.as_object_mut() {
                object.insert(key.to_owned(), value);
            }
            widget
        })
        .collect();
    Ok(ok(ResolvedDashboard {
        id: resolved.record.id,
        slug: resolved.record.slug,
        name: resolved.record.name,
        refresh_seconds: resolved.record.refresh_seconds,
        zone: resolved.zone,
        widgets,
    }))
}
