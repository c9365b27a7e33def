//! Cross-cutting middleware: every error answer in the envelope, one log
//! line per request with its id, and CORS.

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers, Next};
use actix_web::{HttpResponse, Result};
use kernel::Code;
use tracing::Instrument;

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
    // The span follows the request's future: never entered across an await,
    // where another request on the worker could log under it.
    let mut res = next.call(req).instrument(span.clone()).await?;
    let status = res.status().as_u16();
    let route = res.request().match_pattern().unwrap_or(path);
    tracing::info!(parent: &span, %method, %route, status, latency_ms = started.elapsed().as_secs_f64() * 1000.0, "request");
    if let Ok(value) = HeaderValue::from_str(&id) {
        res.headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), value);
    }
    Ok(res)
}

/// Methods and headers a browser application may use across origins.
const CORS_METHODS: &str = "GET, POST, PATCH, DELETE, OPTIONS";
const CORS_HEADERS: &str = "Authorization, Content-Type, X-Service-Timezone";

/// How a request's origin is let in.
enum AllowOrigin {
    /// Listed by name: echoed, with credentials.
    Echo(HeaderValue),
    /// Let in by a literal `*`: any origin, without credentials.
    Any,
}

/// CORS from the setting `security.cors_origins`, read at request time (from
/// the settings cache), so a change applies without a restart. A listed
/// origin is echoed with credentials allowed; `*` answers any origin, without
/// credentials, only when literally listed. Preflights from other origins get
/// 403; their other requests get no CORS headers, so browsers refuse them.
/// The origins are read after the request's credential was resolved (which
/// heeds every change answered by any instance), or, for a request without
/// one and for a preflight, after heeding changes first.
pub async fn cors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<actix_web::body::EitherBody<BoxBody, BoxBody>>> {
    let Some(origin) = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        return Ok(next
            .call(req)
            .await?
            .map_into_boxed_body()
            .map_into_right_body());
    };
    let state = req
        .app_data::<actix_web::web::Data<crate::AppState>>()
        .cloned();
    let preflight = req.method() == actix_web::http::Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if let Some(state) = &state
        && (preflight || crate::extract::bearer(req.request()).is_none())
    {
        // Without a credential to resolve, nothing else would heed them; a
        // failure leaves the handler to answer the database's state.
        let _ = state.auth.heed_changes().await;
    }
    let allowed_for = |state: Option<actix_web::web::Data<crate::AppState>>| async move {
        let settings = state?.auth.current_settings().await.ok()?;
        if settings.cors_origins().any(|o| o == origin) {
            HeaderValue::from_str(&origin).ok().map(AllowOrigin::Echo)
        } else if settings.cors_origins().any(|o| o == "*") {
            Some(AllowOrigin::Any)
        } else {
            None
        }
    };
    let (mut res, allowed) = if preflight {
        let Some(allowed) = allowed_for(state).await else {
            let (req, _) = req.into_parts();
            let res = HttpResponse::from_error(ApiError::new(
                Code::PermissionDenied,
                "This origin may not call the API",
            ));
            return Ok(ServiceResponse::new(req, res).map_into_left_body());
        };
        let (req, _) = req.into_parts();
        let mut res = HttpResponse::NoContent();
        res.insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, CORS_METHODS))
            .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, CORS_HEADERS))
            .insert_header((header::ACCESS_CONTROL_MAX_AGE, "600"));
        (
            ServiceResponse::new(req, res.finish()).map_into_left_body(),
            allowed,
        )
    } else {
        let res = next
            .call(req)
            .await?
            .map_into_boxed_body()
            .map_into_right_body();
        match allowed_for(state).await {
            Some(allowed) => (res, allowed),
            None => return Ok(res),
        }
    };
    let headers = res.headers_mut();
    match allowed {
        AllowOrigin::Echo(origin) => {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        AllowOrigin::Any => {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
        }
    }
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("X-Request-Id"),
    );
    Ok(res)
}
