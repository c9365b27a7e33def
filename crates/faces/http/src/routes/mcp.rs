//! `/api/mcp`: the MCP server while `mcp.enabled`, else 404. The route
//! authenticates the bearer (401 in the envelope), then hands the request to
//! rmcp's Streamable HTTP service, which runs the tools as that caller.
//! rmcp's own refusals that are not JSON (a wrong `Accept`, say) reach the
//! client in the envelope, as every answer of the service does.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, post, web};
use api_types::ErrorEnvelope;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use kernel::Code;
use mcp::McpCaller;
use permissions::Plane;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::LazyCaller;

/// The Model Context Protocol (Streamable HTTP, JSON-RPC 2.0): `initialize`,
/// `tools/list`, `tools/call` with the eight tools of the Data API,
/// DataViews and workflows, run under the caller's grants. 404 while
/// `mcp.enabled` is off.
#[utoipa::path(tag = "mcp", operation_id = "mcp", security(("bearer" = [])),
    request_body(content = Object, description = "A JSON-RPC 2.0 message"),
    responses((status = 200, description = "The JSON-RPC answer (application/json, or text/event-stream)"),
        (status = 202, description = "A notification was taken"),
        (status = 401, description = "No valid credential", body = ErrorEnvelope),
        (status = 404, description = "MCP is disabled (mcp.enabled)", body = ErrorEnvelope)))]
#[post("")]
pub async fn endpoint(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    serve(state, req, caller, body).await
}

/// Other methods of the endpoint: 405 (no sessions to stream or end), 404
/// while MCP is off.
pub async fn other_method(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.services.settings.heed_changes().await?;
    if !state.services.settings.current().await?.mcp_enabled() {
        return Err(ApiError::not_found());
    }
    Err(
        ApiError::new(Code::MethodNotAllowed, "The MCP endpoint takes POST")
            .with_allow("POST".to_owned()),
    )
}

async fn serve(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let Some(caller) = caller else {
        state.services.settings.heed_changes().await?;
        return Err(if state.services.settings.current().await?.mcp_enabled() {
            ApiError::new(
                Code::AuthenticationRequired,
                "A valid credential is required",
            )
        } else {
            ApiError::not_found()
        });
    };
    // Resolving the credential brings the settings up to date.
    let request = caller.request();
    let principal = state.services.sign_in.authenticate(request.bearer).await;
    if !state.services.settings.current().await?.mcp_enabled() {
        return Err(ApiError::not_found());
    }
    let principal = principal?;
    principal.authorize(Plane::Api, false)?;
    let caller = McpCaller {
        bearer: request.bearer.to_owned(),
        principal,
        zone_header: request.zone_header.map(str::to_owned),
        ip: request.ip.map(str::to_owned),
    };
    let mut forwarded = http1::Request::builder()
        .method(req.method().as_str())
        .uri(req.uri().to_string());
    for (name, value) in req.headers() {
        forwarded = forwarded.header(name.as_str(), value.as_bytes());
    }
    let forwarded = forwarded
        .body(Full::new(body))
        .map_err(|_| ApiError::new(Code::InvalidPayload, "A malformed request"))?;
    let (parts, answer) = state
        .mcp_server
        .serve(&state.mcp, forwarded, caller)
        .await
        .into_parts();
    let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        response.append_header((name.as_str(), value.as_bytes()));
    }
    let stream = answer
        .into_data_stream()
        .map(|chunk| chunk.map_err(|never| match never {}));
    Ok(response.streaming(stream))
}
