//! The Data API: rows of exposed tables under the caller's grants. The rows'
//! JSON comes from the store as text and is put in the envelope as it is.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, delete, get, patch, post, web};
use api_types::ErrorEnvelope;
use data::{DataError, ListParams};
use serde::Deserialize;
use serde_json::Value;

use crate::AppState;
use crate::error::ApiError;
use futures_util::StreamExt;

use crate::extract::{CreateBody, Data, LazyCaller};
use crate::respond::{json_data, json_page};

/// The list route's query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Columns to return, comma separated (default: every readable column);
    /// related rows as `alias:fk_column(columns)` (the row a foreign key
    /// points at) or `alias:schema.table!fk_column(columns)` (the rows
    /// pointing here), nested up to 3 deep.
    select: Option<String>,
    /// A JSON filter: `{"and":[...]}`, `{"or":[...]}`, `{"not":...}`, `{"<column>":{"<op>":value}}`.
    filter: Option<String>,
    /// Sort keys, comma separated; `-` before a column for descending.
    sort: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    limit: Option<String>,
    /// Rows to skip (default 0).
    offset: Option<String>,
    /// `exact` adds `meta.total` (with `aggregate`: the number of groups).
    count: Option<String>,
    /// Aggregates instead of rows: `alias:fn(column)`, comma separated, fn
    /// one of count (`count()` counts rows), sum, avg, min, max.
    aggregate: Option<String>,
    /// With `aggregate`: the columns to group by, comma separated.
    #[serde(rename = "groupBy")]
    group_by: Option<String>,
}

/// The list route's parameters as the service takes them; an empty value
/// (`?filter=` from a form) counts as not given.
pub(crate) fn list_params(q: ListQuery) -> ListParams {
    let given = |value: Option<String>| value.filter(|v| !v.is_empty());
    ListParams {
        select: given(q.select),
        filter: given(q.filter),
        sort: given(q.sort),
        limit: given(q.limit),
        offset: given(q.offset),
        count: given(q.count),
        aggregate: given(q.aggregate),
        group_by: given(q.group_by),
    }
}

/// The get route's query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetQuery {
    /// Columns to return, with related rows, as on the list route.
    select: Option<String>,
}

/// A Data API error as an answer to `req`; a 405 names the methods the
/// table answers on that path (a table's: GET, POST; a row's: GET, PATCH,
/// DELETE).
fn data_error(err: DataError, req: &HttpRequest) -> ApiError {
    let on_row = req.match_info().get("pk").is_some();
    let allow = match &err {
        DataError::MethodNotAllowed { allowed } => Some(
            allowed
                .iter()
                .filter(|m| match m.as_str() {
                    "GET" => true,
                    "POST" => !on_row,
                    _ => on_row,
                })
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        _ => None,
    };
    let answer = ApiError::from(err);
    match allow {
        Some(methods) => answer.with_allow(methods),
        None => answer,
    }
}

/// Whether the client asks for CSV: `text/csv` is in `Accept` before any
/// JSON type.
fn wants_csv(req: &HttpRequest) -> bool {
    let Some(accept) = req
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    accept
        .split(',')
        .map(|part| {
            part.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .find(|essence| essence == "text/csv" || essence.ends_with("json"))
        .is_some_and(|essence| essence == "text/csv")
}

/// Rows of a table: `{ data: [row], meta: { limit, offset, total? } }`, or
/// with `Accept: text/csv` the rows as CSV (every matching row unless
/// `limit` is given), streamed.
#[utoipa::path(operation_id = "listRows", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ListQuery),
    responses((status = 200, description = "{ data: [row], meta }; with Accept: text/csv, the rows as CSV (RFC 4180, header row, NULL as an empty unquoted field)",
            content((Object = "application/json"), (String = "text/csv"))),
        (status = 400, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope)))]
#[get("/{schema}/{table}")]
pub async fn list(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table) = path.into_inner();
    let params = list_params(query.into_inner());
    if wants_csv(&req) {
        let chunks = state
            .services
            .data
            .export(caller.request(), (&schema, &table), &params)
            .await
            .map_err(|e| data_error(e, &req))?;
        return Ok(csv_response(chunks));
    }
    let page = state
        .services
        .data
        .list(caller.request(), &schema, &table, &params)
        .await
        .map_err(|e| data_error(e, &req))?;
    Ok(json_page(page))
}

/// A 200 `text/csv` answer streaming `chunks`; an error after the first
/// byte ends the connection early.
fn csv_response(chunks: data::Export) -> HttpResponse {
    let stream = futures_util::stream::unfold(chunks, |mut chunks| async move {
        let piece = chunks
            .recv()
            .await?
            .map(actix_web::web::Bytes::from)
            .map_err(|e| {
                tracing::error!(error = ?e, "a CSV export failed");
                actix_web::error::ErrorInternalServerError("the export failed")
            });
        Some((piece, chunks))
    });
    HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .streaming(stream)
}

/// One row by primary key (composite keys: values joined with commas).
#[utoipa::path(operation_id = "getRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path), GetQuery),
    responses((status = 200, description = "{ data: row }"), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[get("/{schema}/{table}/{pk}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    query: web::Query<GetQuery>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    let select = query.into_inner().select.filter(|s| !s.is_empty());
    let row = state
        .services
        .data
        .get(caller.request(), (&schema, &table), &key, select.as_deref())
        .await
        .map_err(|e| data_error(e, &req))?;
    Ok(json_data(StatusCode::OK, &row))
}

/// Longest wait for the next piece of a CSV body.
const BODY_STALL: std::time::Duration = std::time::Duration::from_secs(30);

/// The create route's query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CreateQuery {
    /// Upsert: the columns of the primary key or of a unique index, comma
    /// separated; a row whose values of them are taken updates that row
    /// (needs create and update grants).
    #[serde(rename = "onConflict")]
    on_conflict: Option<String>,
}

/// Inserts a row (an object) or rows (an array) in one transaction; with
/// `onConflict`, updates the rows whose unique key is taken instead. A
/// `text/csv` body (a header row naming columns) inserts every row in one
/// transaction, streamed: `{ data: { inserted } }`, or the first bad row's
/// error with `meta.line`.
#[utoipa::path(operation_id = "createRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), CreateQuery),
    request_body(description = "{ data: row or [row] }, or CSV with a header row",
        content((Object = "application/json"), (String = "text/csv"))),
    responses((status = 201, description = "{ data: row or [row] }; CSV: { data: { inserted } }"), (status = 400, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope),
        (status = 413, description = "a CSV body over data.import_max_bytes", body = ErrorEnvelope)))]
#[post("/{schema}/{table}")]
pub async fn create(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<CreateQuery>,
    body: Result<CreateBody, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table) = path.into_inner();
    // Exposure and grants are decided before the body is looked at.
    state
        .services
        .data
        .check_method(caller.request(), &schema, &table, "POST")
        .await
        .map_err(|e| data_error(e, &req))?;
    let data = &state.services.data;
    let body = match body? {
        CreateBody::Json(body) => body,
        CreateBody::Csv(_) if query.on_conflict.as_deref().is_some_and(|c| !c.is_empty()) => {
            return Err(ApiError::field(
                kernel::Code::InvalidQuery,
                "onConflict",
                "An upsert takes JSON rows",
            ));
        }
        CreateBody::Csv(mut payload) => {
            let mut import = data
                .begin_import(caller.request(), (&schema, &table))
                .await
                .map_err(|e| data_error(e, &req))?;
            // A body that stalls ends the import (nothing is inserted).
            while let Some(piece) = actix_web::rt::time::timeout(BODY_STALL, payload.next())
                .await
                .map_err(|_| {
                    ApiError::new(kernel::Code::InvalidPayload, "The body stopped arriving")
                })?
            {
                let piece = piece.map_err(|_| {
                    ApiError::new(kernel::Code::InvalidPayload, "The body could not be read")
                })?;
                import.feed(&piece).await?;
            }
            let inserted = import.finish().await?;
            return Ok(json_data(
                StatusCode::CREATED,
                &format!("{{\"inserted\":{inserted}}}"),
            ));
        }
    };
    let rows = match query.into_inner().on_conflict.filter(|c| !c.is_empty()) {
        Some(key) => {
            data.upsert(caller.request(), (&schema, &table), &body, &key)
                .await
        }
        None => data.create(caller.request(), &schema, &table, &body).await,
    }
    .map_err(|e| data_error(e, &req))?;
    Ok(json_data(StatusCode::CREATED, &rows))
}

/// Changes columns of one row.
#[utoipa::path(operation_id = "updateRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path)),
    request_body(content = Object, description = "{ data: columns }"),
    responses((status = 200, description = "{ data: row }"), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[patch("/{schema}/{table}/{pk}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    body: Result<Data<Value>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    // Exposure and grants are decided before the body is looked at.
    state
        .services
        .data
        .check_method(caller.request(), &schema, &table, "PATCH")
        .await
        .map_err(|e| data_error(e, &req))?;
    let body = body?;
    let row = state
        .services
        .data
        .update(caller.request(), &schema, &table, &key, &body.0)
        .await
        .map_err(|e| data_error(e, &req))?;
    Ok(json_data(StatusCode::OK, &row))
}

/// Deletes one row.
#[utoipa::path(operation_id = "deleteRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/{schema}/{table}/{pk}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    state
        .services
        .data
        .delete(caller.request(), &schema, &table, &key)
        .await
        .map_err(|e| data_error(e, &req))?;
    Ok(HttpResponse::NoContent().finish())
}

/// Any other method on a table or row: 405 when the table is exposed, 404 when
/// it is hidden or unknown.
pub async fn other_method(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let schema = req.match_info().get("schema").unwrap_or_default();
    let table = req.match_info().get("table").unwrap_or_default();
    state
        .services
        .data
        .check_method(caller.request(), schema, table, req.method().as_str())
        .await
        .map_err(|e| data_error(e, &req))?;
    Err(ApiError::new(
        kernel::Code::MethodNotAllowed,
        "This table is not exposed for this method",
    ))
}

/// Data API row routes run in order as the caller, in one transaction:
/// `{ data: [ { method, path, query?, body? } ] }`, 1 to 100 operations; a
/// later body or path may use `{{n.data.<path>}}` of operation n's answer.
#[utoipa::path(operation_id = "batch", tag = "data", security(("bearer" = [])),
    request_body(content = Object, description = "{ data: [ { method, path, query?, body? } ] }"),
    responses((status = 200, description = "{ data: [ { status, data } ] }"),
        (status = 400, description = "a bad operation, with meta.index when one was run", body = ErrorEnvelope),
        (status = 401, body = ErrorEnvelope),
        (status = 403, description = "an operation refused, with meta.index; nothing written", body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("")]
pub async fn batch(
    state: web::Data<AppState>,
    caller: LazyCaller,
    body: Data<Value>,
) -> Result<HttpResponse, ApiError> {
    let answers = state.services.data.batch(caller.request(), &body.0).await?;
    let mut out = String::from("[");
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Each answer's data is JSON text written by the store.
        out.push_str(&format!(
            "{{\"status\":{},\"data\":{}}}",
            answer.status, answer.data
        ));
    }
    out.push(']');
    Ok(json_data(StatusCode::OK, &out))
}
