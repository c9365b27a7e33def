//! The one table of error codes. Each code has a kind; only the HTTP layer
//! turns kinds into status codes.

use std::borrow::Cow;

/// Broad class of a failure, mapped to a status code by the HTTP layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is wrong (400).
    InvalidRequest,
    /// No valid credential (401).
    Unauthenticated,
    /// A valid credential without the right to do this (403).
    Forbidden,
    /// Nothing with that id or name (404).
    NotFound,
    /// The resource exists but not for this method (405).
    MethodNotAllowed,
    /// The change conflicts with existing data (409).
    Conflict,
    /// The body is over the size limit (413).
    PayloadTooLarge,
    /// The body is not of a media type the route takes (415).
    UnsupportedMediaType,
    /// A range of bytes outside the file (416).
    RangeNotSatisfiable,
    /// Too many requests (429).
    RateLimited,
    /// A bug (500).
    Internal,
    /// The database cannot be reached (503).
    Unavailable,
    /// A wait ran out (504).
    Timeout,
}

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $text:literal, $kind:ident;)*) => {
        /// Every error code the service answers with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Code {
            $($(#[$doc])* $name,)*
        }

        impl Code {
            /// The UPPER_SNAKE string of the code, as sent to clients.
            pub const fn as_str(self) -> &'static str {
                match self { $(Code::$name => $text,)* }
            }

            /// The class of failure the code belongs to.
            pub const fn kind(self) -> ErrorKind {
                match self { $(Code::$name => ErrorKind::$kind,)* }
            }
        }
    };
}

codes! {
    /// Body is not JSON, lacks a field, or a field has a wrong type or value.
    InvalidPayload = "INVALID_PAYLOAD", InvalidRequest;
    /// A bad query parameter.
    InvalidQuery = "INVALID_QUERY", InvalidRequest;
    /// Wrong current password on a password change.
    InvalidCurrentPassword = "INVALID_CURRENT_PASSWORD", InvalidRequest;
    /// A reset, verification or invitation token that is invalid, used or expired.
    InvalidToken = "INVALID_TOKEN", InvalidRequest;
    /// A sign-in with a provider failed (only ever in a redirect's fragment).
    OauthFailed = "OAUTH_FAILED", Unauthenticated;
    /// A table CHECK failed.
    CheckViolation = "CHECK_VIOLATION", InvalidRequest;
    /// A required column is missing.
    NotNullViolation = "NOT_NULL_VIOLATION", InvalidRequest;
    /// No valid credential, or a failed sign-in.
    AuthenticationRequired = "AUTHENTICATION_REQUIRED", Unauthenticated;
    /// An expired or revoked session.
    SessionExpired = "SESSION_EXPIRED", Unauthenticated;
    /// Right password, unverified email, verification required.
    EmailNotVerified = "EMAIL_NOT_VERIFIED", Forbidden;
    /// Right password (or provider), and the account has a second factor:
    /// the error carries the `challenge` to finish with.
    MfaRequired = "MFA_REQUIRED", Unauthenticated;
    /// A change of an account's factors from a session that proved none,
    /// while the account has one.
    FactorProofRequired = "MFA_REQUIRED", Forbidden;
    /// A wrong second-factor code for a change of the caller's own factors.
    InvalidMfaCode = "INVALID_MFA_CODE", InvalidRequest;
    /// A wrong second-factor code at a sign-in challenge.
    MfaCodeRefused = "INVALID_MFA_CODE", Unauthenticated;
    /// An administrator's session without a second factor while
    /// `auth.mfa_required_for_admins` is on, outside its enrollment.
    MfaEnrollmentRequired = "MFA_ENROLLMENT_REQUIRED", Forbidden;
    /// Authenticated but not allowed.
    PermissionDenied = "PERMISSION_DENIED", Forbidden;
    /// Authenticated webhook without the invoke grant.
    ActionDenied = "ACTION_DENIED", Forbidden;
    /// Unknown id or name.
    NotFound = "NOT_FOUND", NotFound;
    /// Exposed, but not for this method.
    MethodNotAllowed = "METHOD_NOT_ALLOWED", MethodNotAllowed;
    /// Unique or foreign-key violation, or a name already taken.
    Conflict = "CONFLICT", Conflict;
    /// Body over the size limit.
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", PayloadTooLarge;
    /// Body of a media type the route does not take.
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", UnsupportedMediaType;
    /// A `Range` outside the file asked for.
    RangeNotSatisfiable = "RANGE_NOT_SATISFIABLE", RangeNotSatisfiable;
    /// Too many calls.
    RateLimitExceeded = "RATE_LIMIT_EXCEEDED", RateLimited;
    /// No such workflow, or not published, enabled, a webhook or of this method.
    WorkflowNotFound = "WORKFLOW_NOT_FOUND", NotFound;
    /// A webhook POST body that is not a JSON object or array.
    WorkflowWebhookInvalidPayload = "WORKFLOW_WEBHOOK_INVALID_PAYLOAD", InvalidRequest;
    /// A synchronous run did not finish within its wait.
    WorkflowSyncTimeout = "WORKFLOW_SYNC_TIMEOUT", Timeout;
    /// The result route knows no such run for this caller.
    WorkflowRunNotFound = "WORKFLOW_RUN_NOT_FOUND", NotFound;
    /// PostgreSQL refused a statement of the SQL console.
    SqlError = "SQL_ERROR", InvalidRequest;
    /// A database function called through the Data API raised an exception
    /// (its `USING HINT` may name another code, [`ErrorCode::code_text`]).
    FunctionRaised = "FUNCTION_RAISED", InvalidRequest;
    /// A database function called through the Data API failed otherwise.
    FunctionFailed = "FUNCTION_FAILED", InvalidRequest;
    /// A statement shaped by the caller's query ran past `data.statement_timeout_ms`.
    QueryTimeout = "QUERY_TIMEOUT", InvalidRequest;
    /// A bug; details are only in the logs.
    Internal = "INTERNAL", Internal;
    /// The database cannot be reached.
    Unavailable = "UNAVAILABLE", Unavailable;
}

/// Implemented by every domain error so the HTTP layer can render it.
pub trait ErrorCode {
    /// The code sent to the client.
    fn code(&self) -> Code;

    /// The human message sent to the client. Must never carry internals.
    fn message(&self) -> Cow<'_, str>;

    /// The JSON path of the offending input field, when there is one.
    fn field(&self) -> Option<&str> {
        None
    }

    /// Seconds after which a retry may succeed (the `Retry-After` header).
    fn retry_after(&self) -> Option<u64> {
        None
    }

    /// The 1-based character of the input the error points at (the SQL
    /// console's PostgreSQL refusals).
    fn position(&self) -> Option<usize> {
        None
    }

    /// The challenge of an MFA_REQUIRED refusal.
    fn challenge(&self) -> Option<&str> {
        None
    }

    /// The envelope's `meta`, such as `{ run }` of a webhook's 504.
    fn meta(&self) -> Option<serde_json::Value> {
        None
    }

    /// An UPPER_SNAKE code of the user's own sent in place of
    /// [`ErrorCode::code`]'s text (a database function's `USING HINT`); the
    /// status stays that of [`ErrorCode::code`].
    fn code_text(&self) -> Option<&str> {
        None
    }
}

/// A validation failure of one input field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// JSON path of the field, relative to the payload.
    pub field: Cow<'static, str>,
    /// What is wrong with it.
    pub message: Cow<'static, str>,
}

impl FieldError {
    /// A failure of `field` described by `message`.
    pub fn new(field: impl Into<Cow<'static, str>>, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl ErrorCode for FieldError {
    fn code(&self) -> Code {
        Code::InvalidPayload
    }

    fn message(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.message)
    }

    fn field(&self) -> Option<&str> {
        Some(&self.field)
    }
}
