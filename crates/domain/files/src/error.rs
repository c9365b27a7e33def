//! Why a file request fails.

use std::borrow::Cow;

use auth::AuthError;
use data::DataError;
use kernel::{Code, ErrorCode, FieldError, StoreError};

/// Why a file request fails.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A PRIVATE file (or an unknown id) asked for without a credential.
    #[error("A valid credential is required")]
    CredentialRequired,
    /// No such file for this caller.
    #[error("Not found")]
    NotFound,
    /// The upload is over `files.max_bytes`.
    #[error("the file is larger than files.max_bytes ({0} bytes)")]
    TooLarge(u64),
    /// The range asked for is outside the file (`size` bytes).
    #[error("the range is outside the file of {0} bytes")]
    RangeNotSatisfiable(u64),
    /// The upload is malformed.
    #[error("{}", .0.message)]
    Invalid(FieldError),
    /// The Data API's rules refused the record (grants, row filters).
    #[error(transparent)]
    Data(#[from] DataError),
    /// The settings could not be read.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The record store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The storage of the bytes failed; details only in the logs.
    #[error("storage failed: {0}")]
    Storage(String),
}

impl FileError {
    /// A malformed upload field.
    pub fn invalid(field: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Self::Invalid(FieldError::new(field, message))
    }
}

impl ErrorCode for FileError {
    fn code(&self) -> Code {
        match self {
            Self::CredentialRequired => Code::AuthenticationRequired,
            Self::NotFound => Code::NotFound,
            Self::TooLarge(_) => Code::PayloadTooLarge,
            Self::RangeNotSatisfiable(_) => Code::RangeNotSatisfiable,
            Self::Invalid(_) => Code::InvalidPayload,
            Self::Data(e) => e.code(),
            Self::Auth(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Storage(_) => Code::Unavailable,
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            Self::Data(e) => e.message(),
            Self::Auth(e) => e.message(),
            Self::Store(e) => e.message(),
            Self::Storage(_) => "The file storage cannot be reached".into(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid(e) => Some(&e.field),
            Self::Data(e) => e.field(),
            Self::Store(e) => e.field(),
            Self::Auth(e) => e.field(),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::Data(e) => e.retry_after(),
            Self::Auth(e) => e.retry_after(),
            Self::Store(e) => e.retry_after(),
            Self::Storage(_) => Some(1),
            _ => None,
        }
    }
}
