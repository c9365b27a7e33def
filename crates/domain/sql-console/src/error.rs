//! Why a console call fails.

use std::borrow::Cow;

use kernel::{Code, ErrorCode, StoreError};

/// Why the store could not run a statement.
#[derive(Debug, thiserror::Error)]
pub enum SqlFailure {
    /// PostgreSQL refused the statement (syntax, read-only, timeout,
    /// permission): its message and, when it has one, the 1-based character
    /// position in the statement.
    #[error("{message}")]
    Refused {
        /// PostgreSQL's message.
        message: String,
        /// Where in the statement, in characters from 1.
        position: Option<usize>,
    },
    /// The text holds more than one statement.
    #[error("the query must be one statement")]
    SeveralStatements,
    /// A parameter cannot be bound as the type PostgreSQL inferred for it.
    #[error("{message}")]
    BadParameter {
        /// The parameter's path, such as `params[0]`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The store failed (unavailable database, bug).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a console call fails.
#[derive(Debug, thiserror::Error)]
pub enum SqlConsoleError {
    /// A token while `sql_console.allow_api_tokens` is off.
    #[error("the SQL console needs a session unless sql_console.allow_api_tokens is on")]
    PermissionDenied,
    /// The request is wrong before reaching the database.
    #[error("{field}: {message}")]
    Invalid {
        /// The JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The statement failed.
    #[error(transparent)]
    Failed(#[from] SqlFailure),
    /// The settings could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SqlConsoleError {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

impl ErrorCode for SqlConsoleError {
    fn code(&self) -> Code {
        match self {
            Self::PermissionDenied => Code::PermissionDenied,
            Self::Invalid { .. }
            | Self::Failed(SqlFailure::SeveralStatements | SqlFailure::BadParameter { .. }) => {
                Code::InvalidPayload
            }
            Self::Failed(SqlFailure::Refused { .. }) => Code::SqlError,
            Self::Failed(SqlFailure::Store(e)) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            Self::Invalid { message, .. } => Cow::Borrowed(message),
            Self::Failed(SqlFailure::Store(e)) => e.message(),
            Self::Store(e) => e.message(),
            other => Cow::Owned(other.to_string()),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            Self::Failed(SqlFailure::SeveralStatements) => Some("query"),
            Self::Failed(SqlFailure::BadParameter { field, .. }) => Some(field),
            Self::Failed(SqlFailure::Store(e)) => e.field(),
            Self::Store(e) => e.field(),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Failed(SqlFailure::Store(e)) => e.retry_after(),
            Self::Store(e) => e.retry_after(),
            _ => None,
        }
    }

    fn position(&self) -> Option<usize> {
        match self {
            Self::Failed(SqlFailure::Refused { position, .. }) => *position,
            _ => None,
        }
    }
}
