//! Extractors: JSON bodies with field-precise errors, the client address, and
//! the authenticated caller of each access policy.

use std::marker::PhantomData;
use std::net::IpAddr;

use actix_web::dev::Payload;
use actix_web::error::PayloadError;
use actix_web::http::{Method, header};
use actix_web::{FromRequest, HttpRequest, web};
use data::DataRequest;
use futures_util::future::LocalBoxFuture;
use kernel::Code;
use permissions::{Plane, Principal};
use serde::de::DeserializeOwned;

use crate::AppState;
use crate::error::ApiError;

/// A JSON body whose fields sit at the top level (the `/api/auth` routes).
#[derive(Debug)]
pub struct Body<T>(pub T);

/// A JSON body of the shape `{ "data": T }`; yields `T`.
#[derive(Debug)]
pub struct Data<T>(pub T);

fn is_json(req: &HttpRequest) -> Option<bool> {
    let value = req.headers().get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    Some(
        essence == "application/json"
            || (essence.starts_with("application/") && essence.ends_with("+json")),
    )
}

/// Turns a serde failure into an error naming the field, relative to `prefix`.
fn field_error(err: serde_path_to_error::Error<serde_json::Error>, prefix: &str) -> ApiError {
    let inner = err.inner();
    let mut path = err.path().to_string();
    let message = inner.to_string();
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next())
    {
        path = if path == "." {
            missing.to_owned()
        } else {
            format!("{path}.{missing}")
        };
    }
    let path = path.strip_prefix(prefix).unwrap_or(&path).to_owned();
    let readable = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_owned();
    if inner.is_syntax() || inner.is_eof() {
        return ApiError::new(Code::InvalidPayload, "The body is not valid JSON");
    }
    if path.is_empty() || path == "." {
        ApiError::new(Code::InvalidPayload, readable)
    } else {
        ApiError::field(Code::InvalidPayload, path, readable)
    }
}

async fn read_json<T: DeserializeOwned>(
    req: HttpRequest,
    mut payload: Payload,
    prefix: &'static str,
) -> Result<T, ApiError> {
    if is_json(&req) == Some(false) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "The body must be application/json",
        ));
    }
    let bytes = web::Bytes::from_request(&req, &mut payload)
        .await
        .map_err(|err| match err.as_error::<PayloadError>() {
            Some(PayloadError::Overflow) => {
                ApiError::new(Code::PayloadTooLarge, "The body is too large")
            }
            _ if err.error_response().status()
                == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ApiError::new(Code::PayloadTooLarge, "The body is too large")
            }
            _ => ApiError::new(Code::InvalidPayload, "The body could not be read"),
        })?;
    if bytes.is_empty() {
        return Err(ApiError::new(
            Code::InvalidPayload,
            "A JSON body is required",
        ));
    }
    if is_json(&req).is_none() {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "The body must be application/json",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| field_error(e, prefix))?;
    de.end()
        .map_err(|_| ApiError::new(Code::InvalidPayload, "The body is not valid JSON"))?;
    Ok(value)
}

impl<T: DeserializeOwned + 'static> FromRequest for Body<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let (req, payload) = (req.clone(), payload.take());
        Box::pin(async move { read_json(req, payload, "").await.map(Body) })
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for Data<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let (req, payload) = (req.clone(), payload.take());
        Box::pin(async move {
            read_json::<api_types::DataBody<T>>(req, payload, "data.")
                .await
                .map(|body| Data(body.data))
        })
    }
}

/// The Data API create route's body: JSON `{ "data": ... }`, or CSV
/// (`Content-Type: text/csv`) left unread, to be streamed.
pub enum CreateBody {
    /// The `data` of a JSON body.
    Json(serde_json::Value),
    /// A CSV body, not read yet.
    Csv(Payload),
}

impl FromRequest for CreateBody {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let csv = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/csv"));
        if csv {
            let payload = payload.take();
            return Box::pin(async move { Ok(CreateBody::Csv(payload)) });
        }
        let json = Data::<serde_json::Value>::from_request(req, payload);
        Box::pin(async move { json.await.map(|body| CreateBody::Json(body.0)) })
    }
}

/// The client's address: the peer, or the `X-Forwarded-For` hop a trusted proxy vouches for.
pub fn client_ip(req: &HttpRequest, trusted: &[IpAddr]) -> Option<String> {
    let peer = req.peer_addr()?.ip();
    if !trusted.contains(&peer) {
        return Some(peer.to_string());
    }
    let forwarded = req
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let hop = forwarded
        .rsplit(',')
        .filter_map(|h| h.trim().parse::<IpAddr>().ok())
        .find(|ip| !trusted.contains(ip));
    Some(hop.unwrap_or(peer).to_string())
}

/// Where the request came from.
#[derive(Debug, Clone)]
pub struct ClientOrigin(pub auth::Origin);

impl FromRequest for ClientOrigin {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Ok(ClientOrigin(origin(req))))
    }
}

/// Where `req` came from: its client address (through trusted proxies)
/// and user agent.
pub(crate) fn origin(req: &HttpRequest) -> auth::Origin {
    let trusted = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.trusted_proxies.as_slice())
        .unwrap_or_default();
    auth::Origin {
        ip: client_ip(req, trusted),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    }
}

/// An access policy: which plane a route belongs to, and whether it needs a session.
pub trait Policy: 'static {
    /// The plane of the route.
    const PLANE: Plane;
    /// Whether tokens are refused.
    const SESSION_ONLY: bool;
    /// Whether an administrator's session without a second factor passes
    /// while `auth.mfa_required_for_admins` is on (sign-out, enrollment).
    const WHILE_ENROLLING: bool = false;
}

/// Any credential valid on the Data API plane.
#[derive(Debug)]
pub struct ApiPlane;
/// A session, on the Data API plane (account routes).
#[derive(Debug)]
pub struct SessionOnly;
/// A session, on the Data API plane, that may still be enrolling its
/// second factor (sign-out and the MFA routes).
#[derive(Debug)]
pub struct Enrolling;
/// An administrator, with a session or an ADMIN token.
#[derive(Debug)]
pub struct AdminPlane;

impl Policy for ApiPlane {
    const PLANE: Plane = Plane::Api;
    const SESSION_ONLY: bool = false;
}
impl Policy for SessionOnly {
    const PLANE: Plane = Plane::Api;
    const SESSION_ONLY: bool = true;
}
impl Policy for Enrolling {
    const PLANE: Plane = Plane::Api;
    const SESSION_ONLY: bool = true;
    const WHILE_ENROLLING: bool = true;
}
impl Policy for AdminPlane {
    const PLANE: Plane = Plane::Admin;
    const SESSION_ONLY: bool = false;
}

/// The authenticated caller of a route guarded by policy `P`.
#[derive(Debug)]
pub struct Caller<P> {
    /// Who is calling, as read from the database for this request.
    pub principal: Principal,
    /// Where the request came from.
    pub origin: auth::Origin,
    policy: PhantomData<P>,
}

impl<P> Caller<P> {
    /// The caller's address, for the audit log.
    pub fn ip(&self) -> Option<String> {
        self.origin.ip.clone()
    }
}

/// The caller of a route whose service resolves the credential itself, in
/// the request's own statement (the Data API's one round trip): the bearer
/// secret with where the request comes from, never handled by the handler.
#[derive(Debug)]
pub struct LazyCaller {
    secret: String,
    zone_header: Option<String>,
    /// The client's address, for the audit log of writes (not read for
    /// GET and HEAD, which write nothing).
    ip: Option<String>,
}

/// The header naming the caller's time zone for `$PERIOD`.
const ZONE_HEADER: &str = "x-service-timezone";

impl LazyCaller {
    /// The caller of `req` with the credential `secret` sent another way
    /// than the Authorization header (realtime's `access_token`).
    pub(crate) fn with_secret(req: &HttpRequest, secret: String) -> Self {
        let writes = !matches!(*req.method(), Method::GET | Method::HEAD);
        LazyCaller {
            secret,
            zone_header: req
                .headers()
                .get(ZONE_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            ip: if writes { origin(req).ip } else { None },
        }
    }

    /// The request as the domain services take it.
    pub fn request(&self) -> DataRequest<'_> {
        DataRequest {
            bearer: &self.secret,
            zone_header: self.zone_header.as_deref(),
            ip: self.ip.as_deref(),
        }
    }
}

impl FromRequest for LazyCaller {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let caller = bearer(req).map(|secret| LazyCaller::with_secret(req, secret));
        std::future::ready(caller.ok_or_else(credential_required))
    }
}

pub(crate) fn credential_required() -> ApiError {
    ApiError::new(
        Code::AuthenticationRequired,
        "A valid credential is required",
    )
}

/// The bearer secret of the Authorization header.
pub(crate) fn bearer(req: &HttpRequest) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, secret) = value.trim().split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty() && secret.len() <= 512)
        .then(|| secret.to_owned())
}

impl<P: Policy> FromRequest for Caller<P> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let secret = bearer(req);
        let origin = origin(req);
        Box::pin(async move {
            let state = state.ok_or_else(|| ApiError::new(Code::Internal, "Internal error"))?;
            let secret = secret.ok_or_else(credential_required)?;
            let sign_in = &state.services.sign_in;
            let principal = if P::WHILE_ENROLLING {
                sign_in.resolve_enrolling(&secret).await?.principal
            } else {
                sign_in.authenticate(&secret).await?
            };
            principal.authorize(P::PLANE, P::SESSION_ONLY)?;
            Ok(Caller {
                principal,
                origin,
                policy: PhantomData,
            })
        })
    }
}
