//! Cross-cutting middleware: every error answer in the envelope, and one log
//! line per request with its id.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers, Next};
use actix_web::{HttpResponse, Result};
use kernel::Code;

use crate::error::ApiError;

/// Rewrites any error answer that is not already JSON (actix's own 404, 405,
/// 413, ...) into the envelope, so no answer of the service escapes it.
pub fn envelope_errors<B: MessageBody + 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().default_handler(|res: ServiceResponse<B>| {
        let is_json = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
        }
        let status = res.status();
        let error = match status.as_u16() {
            400 => ApiError::new(Code::InvalidPayload, "Bad request"),
            401 => ApiError::new(
                Code::AuthenticationRequired,
                "A valid credential is required",
            ),
            403 => ApiError::new(Code::PermissionDenied, "Permission denied"),
            404 | 405 => ApiError::not_found(),
            413 => ApiError::new(Code::PayloadTooLarge, "The body is too large"),
            415 => ApiError::new(
                Code::UnsupportedMediaType,
                "The body must be application/json",
            ),
            429 => ApiError::new(Code::RateLimitExceeded, "Too many requests"),
            503 => ApiError::new(Code::Unavailable, "The service is unavailable; retry later"),
            _ => ApiError::new(Code::Internal, "Internal error"),
        };
        let (req, _) = res.into_parts();
        let status = if status.as_u16() == 405 {
            actix_web::http::StatusCode::NOT_FOUND
        } else {
            status
        };
        let response: HttpResponse<BoxBody> = HttpResponse::build(status).json(error.envelope());
        Ok(ErrorHandlerResponse::Response(
            ServiceResponse::new(req, response).map_into_right_body(),
        ))
    })
}

/// Logs method, route, status and latency of each request under a request id,
/// which is also returned in `X-Request-Id`.
pub async fn trace_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>> {
    let started = Instant::now();
    let id = kernel::new_id().simple().to_string();
    let span = tracing::info_span!("request", request_id = %id);
    let method = req.method().clone();
    let path = req.path().to_owned();
    let mut res = {
        let _entered = span.enter();
        next.call(req).await?
    };
    let status = res.status().as_u16();
    let route = res.request().match_pattern().unwrap_or(path);
    tracing::info!(parent: &span, %method, %route, status, latency_ms = started.elapsed().as_secs_f64() * 1000.0, "request");
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), value);
    }
    Ok(res)
}
