//! The error every store implementation returns, whatever its backend.

use std::borrow::Cow;

use crate::error::{Code, ErrorCode, FieldError};

/// A failure of a persistence operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record named in the call does not exist.
    #[error("not found")]
    NotFound,
    /// A unique or foreign-key rule refused the change.
    #[error("{message}")]
    Conflict {
        /// The input field that collides, when known.
        field: Option<&'static str>,
        /// What collides.
        message: Cow<'static, str>,
    },
    /// A row broke a CHECK constraint; the Data API shows the column's check message.
    #[error("check {constraint} failed")]
    CheckViolation {
        /// The constraint's name.
        constraint: String,
    },
    /// A required column got no value.
    #[error("{column} is required")]
    NotNullViolation {
        /// The column.
        column: String,
    },
    /// A value does not parse as its column's type.
    #[error("a value does not fit its column's type")]
    BadValue,
    /// A written row fell outside every grant that allows the change.
    #[error("the row is outside what your grants allow")]
    RowDenied,
    /// An input referenced something that does not exist (such as an unknown role id).
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// State cached by this instance changed in the database while the
    /// request was answered; the caller reloads and asks again.
    #[error("the cached shared state is stale")]
    Stale,
    /// The statement ran past the statement timeout
    /// (`data.statement_timeout_ms`) and was cancelled.
    #[error("the query ran past the statement timeout")]
    QueryTimeout,
    /// An answer passed `data.max_answer_bytes` while it was built.
    #[error("the answer is larger than data.max_answer_bytes")]
    AnswerTooLarge,
    /// The database cannot be reached.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else; the text goes to the logs only.
    #[error("store failure: {0}")]
    Internal(String),
}

impl StoreError {
    /// A conflict on `field`.
    pub fn conflict(field: &'static str, message: &'static str) -> Self {
        Self::Conflict {
            field: Some(field),
            message: Cow::Borrowed(message),
        }
    }
}

impl ErrorCode for StoreError {
    fn code(&self) -> Code {
        match self {
            StoreError::NotFound => Code::NotFound,
            StoreError::Conflict { .. } => Code::Conflict,
            StoreError::CheckViolation { .. } => Code::CheckViolation,
            StoreError::NotNullViolation { .. } => Code::NotNullViolation,
            StoreError::Invalid(_) | StoreError::BadValue => Code::InvalidPayload,
            StoreError::RowDenied => Code::PermissionDenied,
            StoreError::Unavailable(_) | StoreError::Stale => Code::Unavailable,
            StoreError::Internal(_) => Code::Internal,
            StoreError::QueryTimeout => Code::QueryTimeout,
            StoreError::AnswerTooLarge => Code::InvalidQuery,
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            StoreError::NotFound => "Not found".into(),
            StoreError::Conflict { message, .. } => Cow::Borrowed(message),
            StoreError::Invalid(e) => Cow::Borrowed(&e.message),
            StoreError::CheckViolation { .. } => "A value breaks a rule of the table".into(),
            StoreError::BadValue | StoreError::RowDenied => self.to_string().into(),
            StoreError::NotNullViolation { column } => format!("{column} is required").into(),
            StoreError::Unavailable(_) => "The database is unavailable; retry later".into(),
            StoreError::Stale => "The service is busy with changes; retry later".into(),
            StoreError::Internal(_) => "Internal error".into(),
            StoreError::AnswerTooLarge => "The answer is larger than this instance allows \
                 (data.max_answer_bytes); page with a smaller limit, or narrow it with \
                 select or a filter"
                .into(),
            StoreError::QueryTimeout => "The query ran longer than this instance allows \
                 (data.statement_timeout_ms); narrow it with a filter or a smaller limit"
                .into(),
        }
    }

    fn retry_after(&self) -> Option<u64> {
        matches!(self, StoreError::Unavailable(_) | StoreError::Stale).then_some(1)
    }

    fn field(&self) -> Option<&str> {
        match self {
            StoreError::Conflict { field, .. } => *field,
            StoreError::Invalid(e) => Some(&e.field),
            StoreError::NotNullViolation { column } => Some(column),
            _ => None,
        }
    }
}
