//! The Data API: rows of exposed tables under the caller's grants. The JSON of
//! each answer is built by PostgreSQL and sent as it comes.

use actix_web::http::header::ContentType;
use actix_web::{HttpRequest, HttpResponse, delete, get, patch, post, web};
use api_types::ErrorEnvelope;
use data::{Caller as DataCaller, DataError, ListParams, ReadRequest};
use serde::Deserialize;
use serde_json::Value;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiPlane, Bearer, Caller, Data};

/// The list route's query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Columns to return, comma separated (default: every readable column).
    select: Option<String>,
    /// A JSON filter: `{"and":[...]}`, `{"or":[...]}`, `{"not":...}`, `{"<column>":{"<op>":value}}`.
    filter: Option<String>,
    /// Sort keys, comma separated; `-` before a column for descending.
    sort: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    limit: Option<String>,
    /// Rows to skip (default 0).
    offset: Option<String>,
    /// `exact` adds `meta.total`.
    count: Option<String>,
}

const ZONE_HEADER: &str = "x-service-timezone";

fn caller<'a>(caller: &'a Caller<ApiPlane>, req: &'a HttpRequest) -> DataCaller<'a> {
    DataCaller {
        principal: &caller.principal,
        zone_header: zone_header(req),
        ip: caller.origin.ip.as_deref(),
    }
}

fn read_request<'a>(bearer: &'a Bearer, req: &'a HttpRequest) -> ReadRequest<'a> {
    ReadRequest {
        bearer: &bearer.secret,
        zone_header: zone_header(req),
    }
}

fn zone_header(req: &HttpRequest) -> Option<&str> {
    req.headers().get(ZONE_HEADER).and_then(|v| v.to_str().ok())
}

/// A Data API error as an answer; a 405 names the methods the table answers.
fn data_error(err: DataError) -> ApiError {
    let allow = match &err {
        DataError::MethodNotAllowed { allowed } => Some(allowed.join(", ")),
        _ => None,
    };
    let answer = ApiError::from(err);
    match allow {
        Some(methods) => answer.with_allow(methods),
        None => answer,
    }
}

fn json(status: actix_web::http::StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(ContentType::json())
        .body(body)
}

/// Rows of a table: `{ data: [row], meta: { limit, offset, total? } }`.
#[utoipa::path(operation_id = "listRows", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ListQuery),
    responses((status = 200, description = "{ data: [row], meta }"), (status = 400, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope)))]
#[get("/{schema}/{table}")]
pub async fn list(
    state: web::Data<AppState>,
    bearer: Bearer,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table) = path.into_inner();
    let q = query.into_inner();
    // An empty value (`?filter=` from a form) counts as not given.
    let given = |value: Option<String>| value.filter(|v| !v.is_empty());
    let params = ListParams {
        select: given(q.select),
        filter: given(q.filter),
        sort: given(q.sort),
        limit: given(q.limit),
        offset: given(q.offset),
        count: given(q.count),
    };
    let body = state
        .data
        .list(read_request(&bearer, &req), &schema, &table, &params)
        .await
        .map_err(data_error)?;
    Ok(json(actix_web::http::StatusCode::OK, body))
}

/// One row by primary key (composite keys: values joined with commas).
#[utoipa::path(operation_id = "getRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path)),
    responses((status = 200, description = "{ data: row }"), (status = 404, body = ErrorEnvelope)))]
#[get("/{schema}/{table}/{pk}")]
pub async fn get(
    state: web::Data<AppState>,
    bearer: Bearer,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    let body = state
        .data
        .get(read_request(&bearer, &req), &schema, &table, &key)
        .await
        .map_err(data_error)?;
    Ok(json(actix_web::http::StatusCode::OK, body))
}

/// Inserts a row (an object) or rows (an array) in one transaction.
#[utoipa::path(operation_id = "createRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path)),
    request_body(content = Object, description = "{ data: row or [row] }"),
    responses((status = 201, description = "{ data: row or [row] }"), (status = 400, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/{schema}/{table}")]
pub async fn create(
    state: web::Data<AppState>,
    who: Caller<ApiPlane>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: Result<Data<Value>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table) = path.into_inner();
    // Exposure and grants are decided before the body is looked at.
    state
        .data
        .check_method(&who.principal, &schema, &table, "POST")
        .await
        .map_err(data_error)?;
    let body = body?;
    let body = state
        .data
        .create(caller(&who, &req), &schema, &table, &body.0)
        .await
        .map_err(data_error)?;
    Ok(json(actix_web::http::StatusCode::CREATED, body))
}

/// Changes columns of one row.
#[utoipa::path(operation_id = "updateRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path)),
    request_body(content = Object, description = "{ data: columns }"),
    responses((status = 200, description = "{ data: row }"), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[patch("/{schema}/{table}/{pk}")]
pub async fn update(
    state: web::Data<AppState>,
    who: Caller<ApiPlane>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    body: Result<Data<Value>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    // Exposure and grants are decided before the body is looked at.
    state
        .data
        .check_method(&who.principal, &schema, &table, "PATCH")
        .await
        .map_err(data_error)?;
    let body = body?;
    let body = state
        .data
        .update(caller(&who, &req), &schema, &table, &key, &body.0)
        .await
        .map_err(data_error)?;
    Ok(json(actix_web::http::StatusCode::OK, body))
}

/// Deletes one row.
#[utoipa::path(operation_id = "deleteRow", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("table" = String, Path), ("pk" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/{schema}/{table}/{pk}")]
pub async fn remove(
    state: web::Data<AppState>,
    who: Caller<ApiPlane>,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema, table, key) = path.into_inner();
    state
        .data
        .delete(caller(&who, &req), &schema, &table, &key)
        .await
        .map_err(data_error)?;
    Ok(HttpResponse::NoContent().finish())
}

/// Any other method on a table or row: 405 when the table is exposed, 404 when
/// it is hidden or unknown.
pub async fn other_method(
    state: web::Data<AppState>,
    who: Caller<ApiPlane>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let schema = req.match_info().get("schema").unwrap_or_default();
    let table = req.match_info().get("table").unwrap_or_default();
    state
        .data
        .check_method(&who.principal, schema, table, req.method().as_str())
        .await
        .map_err(data_error)?;
    Err(ApiError::new(
        kernel::Code::MethodNotAllowed,
        "This table is not exposed for this method",
    ))
}
