//! Cross-cutting middleware: every error answer in the envelope, one log
//! line per request with its id, and CORS.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers, Next};
use actix_web::{HttpResponse, ResponseError, Result};
use futures_util::FutureExt;
use kernel::Code;
use tracing::Instrument;

use crate::error::ApiError;

/// Headers every answer carries unless its route set its own: no content
/// sniffing, no referrer. Pages and downloads add a Content-Security-Policy;
/// no answer names the server's software.
pub fn security_headers() -> actix_web::middleware::DefaultHeaders {
    actix_web::middleware::DefaultHeaders::new()
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"))
}

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

/// Whether requests are counted: only once a metrics endpoint is served, so
/// that without one no request builds labels.
static RECORD_METRICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Counts requests from now on (`GET /metrics` is served).
pub fn record_metrics() {
    RECORD_METRICS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Counts one answered request and its latency, by route template only so
/// that the number of series stays bounded.
fn record(method: &actix_web::http::Method, pattern: Option<String>, status: u16, latency: f64) {
    let labels = [
        ("method", method_label(method).to_owned()),
        ("route", pattern.unwrap_or_else(|| "unmatched".to_owned())),
        ("status", status.to_string()),
    ];
    metrics::counter!("tessera_http_requests_total", &labels).increment(1);
    metrics::histogram!("tessera_http_request_duration_seconds", &labels).record(latency);
}

/// A request method as a metrics label: the standard ones, else `OTHER`
/// (any token is a method, and labels must stay few).
fn method_label(method: &actix_web::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "CONNECT" => "CONNECT",
        _ => "OTHER",
    }
}

/// The header answering each request's id.
const REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

/// Logs method, route, status and latency of each request under a request id,
/// which is also returned in `X-Request-Id`. A handler that panics answers
/// 500 INTERNAL (logged with the panic under the request id) instead of
/// dropping the connection.
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
    let id_header = HeaderValue::from_str(&id).ok();
    let outcome = AssertUnwindSafe(next.call(req))
        .catch_unwind()
        .instrument(span.clone())
        .await;
    let mut res = match outcome {
        Ok(res) => res?,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic without a message");
            tracing::error!(parent: &span, %method, %path, status = 500, panic = why, "request panicked");
            let mut response = ApiError::new(Code::Internal, "Internal error").error_response();
            if let Some(value) = id_header {
                response.headers_mut().insert(REQUEST_ID, value);
            }
            // The request went down with the handler: the answer travels as
            // an error the connection's dispatcher writes out as it is.
            return Err(
                actix_web::error::InternalError::from_response(why.to_owned(), response).into(),
            );
        }
    };
    let status = res.status().as_u16();
    let pattern = res.request().match_pattern();
    let route = pattern.as_deref().unwrap_or(&path);
    let latency = started.elapsed().as_secs_f64();
    tracing::info!(parent: &span, %method, %route, status, latency_ms = latency * 1000.0, "request");
    if RECORD_METRICS.load(std::sync::atomic::Ordering::Relaxed) {
        record(&method, pattern, status, latency);
    }
    if let Some(value) = id_header {
        res.headers_mut().insert(REQUEST_ID, value);
    }
    Ok(res)
}

/// Methods and headers a browser application may use across origins.
const CORS_METHODS: &str = "GET, POST, PATCH, DELETE, OPTIONS";
const CORS_HEADERS: &str =
    "Authorization, Content-Type, X-Service-Timezone, Tessera-Consistency-Token";

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
        let _ = state.services.settings.heed_changes().await;
    }
    let allowed_for = |state: Option<actix_web::web::Data<crate::AppState>>| async move {
        let settings = state?.services.settings.current().await.ok()?;
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
        HeaderValue::from_static("X-Request-Id, Tessera-Consistency-Token"),
    );
    Ok(res)
}

/// Read-your-writes over read replicas ([`data::consistency`]): the
/// request's reads wait for the token it sends back in
/// `Tessera-Consistency-Token`, and a request that wrote answers its
/// write's token in the same header (only while replicas serve reads).
pub async fn consistency(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>> {
    let sent = req
        .headers()
        .get(data::consistency::HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (res, token) = data::consistency::scope(sent.as_deref(), next.call(req)).await;
    let mut res = res?;
    if let Some(value) = token.and_then(|t| HeaderValue::from_str(&t.to_string()).ok()) {
        res.headers_mut().insert(
            header::HeaderName::from_static("tessera-consistency-token"),
            value,
        );
    }
    Ok(res)
}

/// Counts a call of a public account route against
/// `auth.account_rate_limit_per_minute` before any part of the request is
/// read, so that every call counts whatever its answer; past the limit 429
/// with `Retry-After`.
pub async fn account_rate_limit(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<actix_web::body::EitherBody<BoxBody, BoxBody>>> {
    if let Some(state) = req
        .app_data::<actix_web::web::Data<crate::AppState>>()
        .cloned()
    {
        let origin = crate::extract::origin(req.request());
        if let Err(error) = state.services.sign_in.take_account_call(&origin).await {
            let (req, _) = req.into_parts();
            let res = HttpResponse::from_error(ApiError::from(error));
            return Ok(ServiceResponse::new(req, res).map_into_left_body());
        }
    }
    Ok(next
        .call(req)
        .await?
        .map_into_boxed_body()
        .map_into_right_body())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};

    use actix_web::{App, HttpServer, dev::Service, test, web};
    use serde_json::Value;

    use super::*;

    /// Log lines written by the subscriber of the test, as JSON.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap();
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        }

        /// The request ids of the events with field `marker` = `value`.
        fn ids_of(&self, marker: &str) -> Vec<String> {
            self.lines()
                .iter()
                .filter(|line| line["fields"]["marker"] == marker)
                .map(|line| line["span"]["request_id"].as_str().unwrap_or("").to_owned())
                .collect()
        }
    }

    fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_writer(move || writer.clone())
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// Logs, yields to the other request, logs again.
    async fn slow(marker: web::Path<String>) -> HttpResponse {
        let marker = marker.into_inner();
        tracing::info!(marker = %marker, "before");
        actix_web::rt::time::sleep(std::time::Duration::from_millis(20)).await;
        tracing::info!(marker = %marker, "after");
        HttpResponse::Ok().finish()
    }

    async fn boom() -> HttpResponse {
        panic!("the handler broke")
    }

    fn app() -> App<
        impl actix_web::dev::ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<impl MessageBody>,
            Error = actix_web::Error,
            InitError = (),
        >,
    > {
        App::new()
            .route("/slow/{marker}", web::get().to(slow))
            .route("/boom", web::get().to(boom))
            .wrap(actix_web::middleware::from_fn(trace_request))
    }

    fn request_id(headers: &header::HeaderMap) -> String {
        headers
            .get(REQUEST_ID)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[actix_web::test]
    async fn interleaved_requests_log_under_their_own_ids() {
        let (captured, _guard) = capture();
        let app = test::init_service(app()).await;
        let (a, b) = futures_util::future::join(
            test::call_service(&app, test::TestRequest::get().uri("/slow/a").to_request()),
            test::call_service(&app, test::TestRequest::get().uri("/slow/b").to_request()),
        )
        .await;
        let (a, b) = (request_id(a.headers()), request_id(b.headers()));
        assert_ne!(a, b);
        assert_eq!(captured.ids_of("a"), vec![a.clone(), a]);
        assert_eq!(captured.ids_of("b"), vec![b.clone(), b]);
        // The two requests did interleave: b began before a ended.
        let messages: Vec<String> = captured
            .lines()
            .iter()
            .filter_map(|line| {
                let fields = &line["fields"];
                Some(format!(
                    "{} {}",
                    fields["marker"].as_str()?,
                    fields["message"].as_str()?
                ))
            })
            .collect();
        assert_eq!(messages, ["a before", "b before", "a after", "b after"]);
    }

    #[actix_web::test]
    async fn a_panic_answers_500_with_the_request_id_logged() {
        let (captured, _guard) = capture();
        let app = test::init_service(app()).await;
        let error = app
            .call(test::TestRequest::get().uri("/boom").to_request())
            .await
            .err()
            .unwrap();
        let response = error.error_response();
        assert_eq!(response.status(), 500);
        let id = request_id(response.headers());
        let logged = captured.lines();
        let panicked = logged
            .iter()
            .find(|line| line["fields"]["message"] == "request panicked")
            .unwrap();
        assert_eq!(panicked["span"]["request_id"], id);
        assert_eq!(panicked["fields"]["panic"], "the handler broke");
        assert_eq!(panicked["level"], "ERROR");
    }

    /// Over a real connection: the client gets the answer, the server goes on.
    #[actix_web::test]
    async fn a_panic_never_drops_the_connection() {
        let server = HttpServer::new(app)
            .workers(1)
            .bind(("127.0.0.1", 0))
            .unwrap();
        let address = server.addrs()[0];
        let running = server.run();
        let handle = running.handle();
        actix_web::rt::spawn(running);
        let fetch = move |path: &'static str| {
            actix_web::rt::task::spawn_blocking(move || {
                let mut stream = std::net::TcpStream::connect(address).unwrap();
                write!(
                    stream,
                    "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                answer
            })
        };
        let answer = fetch("/boom").await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        assert!(answer.contains("x-request-id: "), "{answer}");
        assert!(
            answer.ends_with(r#"{"errors":[{"code":"INTERNAL","message":"Internal error"}]}"#),
            "{answer}"
        );
        assert!(fetch("/slow/c").await.unwrap().starts_with("HTTP/1.1 200"));
        handle.stop(false).await;
    }
}
