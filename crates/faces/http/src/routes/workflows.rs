//! Workflow webhooks and the run-result route (spec: Workflow webhook and run result).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use api_types::{DataEnvelope, ErrorEnvelope, RunOutcome, RunStarted};
use serde_json::{Map, Value};
use workflows::model::WebhookMethod;
use workflows::{WebhookAnswer, WebhookCall, WorkflowError};

use crate::AppState;
use crate::convert::outcome;
use crate::error::ApiError;
use crate::extract::{ApiPlane, Caller, LazyCaller, client_ip};

/// Query parameters: each a string, or a list of strings when repeated.
fn query_of(req: &HttpRequest) -> Map<String, Value> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default();
    let mut query = Map::new();
    for (key, value) in pairs {
        match query.get_mut(&key) {
            None => {
                query.insert(key, Value::String(value));
            }
            Some(Value::Array(items)) => items.push(Value::String(value)),
            Some(first) => *first = Value::Array(vec![first.take(), Value::String(value)]),
        }
    }
    query
}

/// Every header with a lower-case name; repeated headers joined with `, `.
fn headers_of(req: &HttpRequest) -> Map<String, Value> {
    let mut headers = Map::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(first)) => {
                first.push_str(", ");
                first.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    headers
}

async fn answer(
    state: &AppState,
    req: &HttpRequest,
    caller: Option<LazyCaller>,
    method: WebhookMethod,
    body: Option<&[u8]>,
) -> Result<HttpResponse, ApiError> {
    let slug = req.match_info().get("slug").unwrap_or_default();
    let call = WebhookCall {
        slug,
        method,
        bearer: caller.as_ref().map(|c| c.request().bearer),
        query: query_of(req),
        body,
        headers: headers_of(req),
        ip: client_ip(req, &state.trusted_proxies).unwrap_or_default(),
    };
    match state.services.workflows.invoke(call).await? {
        WebhookAnswer::Started(run) => Ok(HttpResponse::build(StatusCode::ACCEPTED).json(
            DataEnvelope {
                data: RunStarted { run },
            },
        )),
        WebhookAnswer::Finished(run) => {
            Ok(HttpResponse::Ok().json(DataEnvelope { data: outcome(run) }))
        }
    }
}

/// Calls a POST webhook with a JSON object or array. Public webhooks need no
/// credential (60 calls a minute per address by default); authenticated ones
/// need the invoke grant. Sync: 200 with the outcome (also FAILED) or 504
/// with `meta.run`; async: 202 with the run id.
#[utoipa::path(tag = "workflows", operation_id = "callWebhookPost", security((), ("bearer" = [])), params(("slug" = String, Path)),
    request_body(content = Object, description = "A JSON object or array"),
    responses((status = 200, description = "The run outcome (sync)", body = inline(DataEnvelope<RunOutcome>)),
        (status = 202, description = "The run started (async)", body = inline(DataEnvelope<RunStarted>)),
        (status = 400, description = "The body is not a JSON object or array", body = ErrorEnvelope),
        (status = 401, description = "No valid credential (authenticated webhook)", body = ErrorEnvelope),
        (status = 403, description = "No invoke grant", body = ErrorEnvelope),
        (status = 404, description = "No such published, enabled POST webhook", body = ErrorEnvelope),
        (status = 413, description = "Body too large", body = ErrorEnvelope),
        (status = 429, description = "Too many public calls from this address", body = ErrorEnvelope),
        (status = 504, description = "The run did not finish within the wait", body = ErrorEnvelope)))]
#[post("/{slug}/webhook")]
pub async fn webhook_post(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    answer(&state, &req, caller, WebhookMethod::Post, Some(&body)).await
}

/// Calls a GET webhook; the answers are those of the POST webhook.
#[utoipa::path(tag = "workflows", operation_id = "callWebhookGet", security((), ("bearer" = [])), params(("slug" = String, Path)),
    responses((status = 200, description = "The run outcome (sync)", body = inline(DataEnvelope<RunOutcome>)),
        (status = 202, description = "The run started (async)", body = inline(DataEnvelope<RunStarted>)),
        (status = 401, description = "No valid credential (authenticated webhook)", body = ErrorEnvelope),
        (status = 403, description = "No invoke grant", body = ErrorEnvelope),
        (status = 404, description = "No such published, enabled GET webhook", body = ErrorEnvelope),
        (status = 429, description = "Too many public calls from this address", body = ErrorEnvelope),
        (status = 504, description = "The run did not finish within the wait", body = ErrorEnvelope)))]
#[get("/{slug}/webhook")]
pub async fn webhook_get(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
) -> Result<HttpResponse, ApiError> {
    answer(&state, &req, caller, WebhookMethod::Get, None).await
}

/// Any other method on a webhook: the same 404 as an unknown workflow.
pub async fn other_method() -> Result<HttpResponse, ApiError> {
    Err(WorkflowError::WebhookNotFound.into())
}

/// The outcome of a run the caller started, while it runs and for 24 hours
/// after, while the caller holds the invoke grant; otherwise 404.
#[utoipa::path(tag = "workflows", operation_id = "getRunResult", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 200, description = "The run outcome", body = inline(DataEnvelope<RunOutcome>)),
        (status = 401, description = "No valid credential", body = ErrorEnvelope),
        (status = 404, description = "No such run for this caller", body = ErrorEnvelope)))]
#[get("/runs/{id}/result")]
pub async fn result(
    state: web::Data<AppState>,
    caller: Caller<ApiPlane>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let run = state
        .services
        .workflows
        .result(&caller.principal, &id)
        .await?;
    Ok(HttpResponse::Ok().json(DataEnvelope { data: outcome(run) }))
}
