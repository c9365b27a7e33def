//! The only place that knows status codes: domain errors become the envelope
//! `{ "errors": [ { code, message, field?, position?, challenge? } ] }`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use api_types::{ErrorEnvelope, ErrorObject};
use kernel::{Code, ErrorCode, ErrorKind};

/// An error answer of the API.
#[derive(Debug)]
pub struct ApiError {
    code: Code,
    message: String,
    field: Option<Box<str>>,
    /// The character of the input the error points at.
    position: Option<usize>,
    /// The challenge of an MFA_REQUIRED refusal, or a code of the user's
    /// own sent in place of `code`'s text (never both).
    named: Option<Named>,
    /// The `Allow` header of a 405.
    allow: Option<Box<str>>,
    /// The `Retry-After` header (seconds) of a 429 or 503.
    retry_after: Option<u32>,
    /// The envelope's `meta`.
    meta: Option<Box<serde_json::Value>>,
}

/// A text an error carries besides its message.
#[derive(Debug)]
enum Named {
    /// The `challenge` of an MFA_REQUIRED refusal.
    Challenge(Box<str>),
    /// A code of the user's own (a database function's `USING HINT`).
    Code(Box<str>),
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            position: None,
            named: None,
            allow: None,
            retry_after: None,
            meta: None,
        }
    }

    /// An error about input field `field`.
    pub fn field(code: Code, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: Some(field.into().into_boxed_str()),
            position: None,
            named: None,
            allow: None,
            retry_after: None,
            meta: None,
        }
    }

    /// Names the methods a resource answers (the `Allow` header of a 405).
    pub fn with_allow(mut self, methods: String) -> Self {
        self.allow = Some(methods.into_boxed_str());
        self
    }

    /// 404 for an unknown path or id.
    pub fn not_found() -> Self {
        Self::new(Code::NotFound, "Not found")
    }

    /// The JSON body of this error.
    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            errors: vec![ErrorObject {
                code: self
                    .named
                    .as_ref()
                    .and_then(|named| match named {
                        Named::Code(code) => Some(&**code),
                        Named::Challenge(_) => None,
                    })
                    .unwrap_or(self.code.as_str())
                    .to_owned(),
                message: self.message.clone(),
                field: self.field.as_deref().map(str::to_owned),
                position: self.position,
                challenge: self.named.as_ref().and_then(|named| match named {
                    Named::Challenge(challenge) => Some(challenge.to_string()),
                    Named::Code(_) => None,
                }),
            }],
            meta: self.meta.as_deref().cloned(),
        }
    }
}

/// The status code of an error kind.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorKind::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
        ErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        status_of(self.code.kind())
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        if let Some(allow) = &self.allow {
            response.insert_header((actix_web::http::header::ALLOW, &**allow));
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((actix_web::http::header::RETRY_AFTER, seconds));
        }
        if self.status_code() == StatusCode::UNAUTHORIZED {
            // RFC 9110 15.5.2: a 401 names the scheme that would pass.
            response.insert_header((actix_web::http::header::WWW_AUTHENTICATE, "Bearer"));
        }
        response.json(self.envelope())
    }
}

impl<E: ErrorCode + std::fmt::Debug> From<E> for ApiError {
    #[track_caller]
    fn from(err: E) -> Self {
        let code = err.code();
        if matches!(code.kind(), ErrorKind::Internal | ErrorKind::Unavailable) {
            let at = std::panic::Location::caller();
            tracing::error!(error = ?err, %at, "request failed");
        }
        Self {
            code,
            message: err.message().into_owned(),
            field: err.field().map(Box::from),
            position: err.position(),
            named: err
                .code_text()
                .map(|code| Named::Code(code.into()))
                .or_else(|| err.challenge().map(|c| Named::Challenge(c.into()))),
            allow: None,
            retry_after: err
                .retry_after()
                .map(|seconds| u32::try_from(seconds).unwrap_or(u32::MAX)),
            meta: err.meta().map(Box::new),
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::RETRY_AFTER;

    use super::*;

    #[test]
    fn refusals_to_retry_carry_retry_after() {
        let busy = ApiError::from(auth::AuthError::Busy).error_response();
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.headers().get(RETRY_AFTER).unwrap(), "1");
        let limited =
            ApiError::from(auth::AuthError::RateLimited { retry_after: 42 }).error_response();
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(limited.headers().get(RETRY_AFTER).unwrap(), "42");
        let denied = ApiError::from(auth::AuthError::InvalidCredentials).error_response();
        assert!(!denied.headers().contains_key(RETRY_AFTER));
        assert_eq!(
            denied
                .headers()
                .get(actix_web::http::header::WWW_AUTHENTICATE)
                .unwrap(),
            "Bearer"
        );
        let forbidden = ApiError::from(auth::AuthError::FactorProofRequired).error_response();
        assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
        assert!(
            !forbidden
                .headers()
                .contains_key(actix_web::http::header::WWW_AUTHENTICATE)
        );
    }
}
