//! Why a Data API request fails, with the code of each reason.

use std::borrow::Cow;

use auth::AuthError;
use kernel::{Code, ErrorCode, FieldError, StoreError};
use permissions::Denied;

/// Why a Data API request fails.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A query parameter is wrong.
    #[error("{}", .0.message)]
    Query(FieldError),
    /// The body is wrong.
    #[error("{}", .0.message)]
    Payload(FieldError),
    /// The credential is missing, unknown or expired.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// No grant allows it.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// No such (visible) table or row.
    #[error("not found")]
    NotFound,
    /// The table is not exposed for this method.
    #[error("this table is not exposed for this method")]
    MethodNotAllowed {
        /// The methods it is exposed for.
        allowed: Vec<String>,
    },
    /// A CHECK constraint failed; the message is the column's check message.
    #[error("{0}")]
    Check(String),
    /// The store failed or refused.
    #[error(transparent)]
    Store(StoreError),
    /// The body is larger than the limit, in bytes.
    #[error("the body is larger than {0} bytes")]
    TooLarge(u64),
    /// The caller holds as many CSV export streams as it may (429).
    #[error("You have {0} exports streaming already; wait for one to end")]
    TooManyExports(usize),
    /// A write hook refused the row: its run's error code and message (400).
    #[error("{message}")]
    Hook {
        /// The run's error code.
        code: String,
        /// Its message.
        message: String,
    },
    /// A write hook ran past `workflows.hook_timeout_ms` (504).
    #[error("A write hook of this table ran past workflows.hook_timeout_ms")]
    HookTimeout,
    /// One part of a request failed: a batch's operation, an import's line.
    #[error("{error}")]
    At {
        /// Where: `{ "index": n }` or `{ "line": n }`, the envelope's `meta`.
        place: Place,
        /// Why.
        error: Box<DataError>,
    },
}

/// The part of a request an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A batch's operation, counted from 0.
    Index(usize),
    /// A CSV record, counted from 1 (the header).
    Line(u64),
}

impl DataError {
    /// This error, as the failure of the part of the request at `place`.
    pub fn at(self, place: Place) -> Self {
        DataError::At {
            place,
            error: Box::new(self),
        }
    }
}

impl DataError {
    /// Whether a read that failed so is worth asking again once the caller
    /// is resolved afresh: anything but a statement or hook timeout or an
    /// answer too large, which would only fail so once more.
    pub fn retried(&self) -> bool {
        !matches!(
            self,
            DataError::Store(kernel::StoreError::QueryTimeout | kernel::StoreError::AnswerTooLarge)
                | DataError::TooManyExports(_)
                | DataError::HookTimeout
        )
    }

    /// Whether the statement found the shared state it was planned on
    /// changed (nothing was answered or written): plan it again.
    pub fn is_stale(&self) -> bool {
        match self {
            DataError::Store(kernel::StoreError::Stale) => true,
            DataError::At { error, .. } => error.is_stale(),
            _ => false,
        }
    }
}

impl From<kernel::StoreError> for DataError {
    fn from(error: kernel::StoreError) -> Self {
        DataError::Store(error)
    }
}

impl ErrorCode for DataError {
    fn code(&self) -> Code {
        match self {
            DataError::Query(_) => Code::InvalidQuery,
            DataError::Payload(_) => Code::InvalidPayload,
            DataError::Auth(e) => e.code(),
            DataError::Denied(_) => Code::PermissionDenied,
            DataError::NotFound => Code::NotFound,
            DataError::MethodNotAllowed { .. } => Code::MethodNotAllowed,
            DataError::Check(_) => Code::CheckViolation,
            DataError::Store(e) => e.code(),
            DataError::TooLarge(_) => Code::PayloadTooLarge,
            DataError::TooManyExports(_) => Code::RateLimitExceeded,
            DataError::Hook { .. } => Code::InvalidPayload,
            DataError::HookTimeout => Code::WorkflowSyncTimeout,
            DataError::At { error, .. } => error.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            DataError::Store(e) => e.message(),
            DataError::Auth(e) => e.message(),
            DataError::NotFound => "Not found".into(),
            DataError::At { error, .. } => error.message(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            DataError::Query(e) | DataError::Payload(e) => Some(&e.field),
            DataError::Store(e) => e.field(),
            DataError::At { error, .. } => error.field(),
            _ => None,
        }
    }

    fn code_text(&self) -> Option<&str> {
        match self {
            DataError::Store(e) => e.code_text(),
            DataError::Hook { code, .. } => Some(code),
            DataError::At { error, .. } => error.code_text(),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            DataError::At { error, .. } => error.retry_after(),
            DataError::Store(error) => error.retry_after(),
            DataError::TooManyExports(_) => Some(crate::exports::RETRY_AFTER),
            _ => None,
        }
    }

    fn meta(&self) -> Option<serde_json::Value> {
        match self {
            DataError::At {
                place: Place::Index(index),
                ..
            } => Some(serde_json::json!({ "index": index })),
            DataError::At {
                place: Place::Line(line),
                ..
            } => Some(serde_json::json!({ "line": line })),
            _ => None,
        }
    }
}

/// A bad query parameter `field`.
pub fn query_error(
    field: impl Into<Cow<'static, str>>,
    message: impl Into<Cow<'static, str>>,
) -> DataError {
    DataError::Query(FieldError::new(field, message))
}

pub(crate) fn payload_error(
    field: impl Into<Cow<'static, str>>,
    message: impl Into<Cow<'static, str>>,
) -> DataError {
    DataError::Payload(FieldError::new(field, message))
}

/// A store failure of a read: a value the database could not parse is the query's fault.
pub fn read_error(err: StoreError) -> DataError {
    match err {
        StoreError::BadValue => query_error("filter", "a value does not fit its column's type"),
        other => DataError::Store(other),
    }
}
