//! `POST` and `GET /api/rpc/{schema}/{function}`: calls of the database
//! functions an administrator registered and exposed (API.md 18).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use api_types::ErrorEnvelope;
use serde_json::{Map, Value};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Data, LazyCaller};
use crate::respond::json_data;

/// Calls `schema.function` with `arguments` as the caller.
async fn call(
    state: &AppState,
    caller: &LazyCaller,
    (schema, function): (String, String),
    method: &str,
    arguments: &Map<String, Value>,
) -> Result<HttpResponse, ApiError> {
    let answer = state
        .services
        .data
        .call_function(caller.request(), &schema, &function, method, arguments)
        .await
        .map_err(|err| {
            let allow = match &err {
                data::DataError::MethodNotAllowed { allowed } => Some(allowed.join(", ")),
                _ => None,
            };
            let answer = ApiError::from(err);
            match allow {
                Some(methods) => answer.with_allow(methods),
                None => answer,
            }
        })?;
    Ok(json_data(StatusCode::OK, &answer))
}

/// Calls a database function with the arguments of `data`, by name: 200
/// `{ data: result }` (a scalar, a row as an object, a set as an array,
/// void as null).
#[utoipa::path(operation_id = "callFunction", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("function" = String, Path)),
    request_body(content = Object, description = "{ data: { argument: value } }"),
    responses((status = 200, body = Object, description = "{ data: result }"),
        (status = 400, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope)))]
#[post("/{schema}/{function}")]
pub async fn call_post(
    state: web::Data<AppState>,
    caller: LazyCaller,
    path: web::Path<(String, String)>,
    body: Data<Option<Map<String, Value>>>,
) -> Result<HttpResponse, ApiError> {
    let arguments = body.0.unwrap_or_default();
    call(&state, &caller, path.into_inner(), "POST", &arguments).await
}

/// Calls an immutable or stable database function with the query
/// parameters as its arguments (each JSON-decoded when it parses as JSON,
/// else a string).
#[utoipa::path(operation_id = "callFunctionByGet", tag = "data", security(("bearer" = [])),
    params(("schema" = String, Path), ("function" = String, Path)),
    responses((status = 200, body = Object, description = "{ data: result }"),
        (status = 400, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope)))]
#[get("/{schema}/{function}")]
pub async fn call_get(
    state: web::Data<AppState>,
    caller: LazyCaller,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let pairs =
        web::Query::<Vec<(String, String)>>::from_query(req.query_string()).map_err(|_| {
            ApiError::new(
                kernel::Code::InvalidQuery,
                "The query string does not parse",
            )
        })?;
    let arguments: Map<String, Value> = pairs
        .into_inner()
        .into_iter()
        .map(|(name, text)| {
            let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            (name, value)
        })
        .collect();
    call(&state, &caller, path.into_inner(), "GET", &arguments).await
}
