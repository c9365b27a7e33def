//! Why a DataView or dashboard request fails.

use std::borrow::Cow;

use data::DataError;
use kernel::{Code, ErrorCode, FieldError, StoreError};

/// Why a DataView or dashboard request fails.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A definition or dashboard is wrong.
    #[error("{}", .0.message)]
    Invalid(#[from] FieldError),
    /// A read failed as a Data API read would (credential, grants, query).
    #[error(transparent)]
    Data(#[from] DataError),
    /// The store failed or refused (unknown id, taken slug).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ErrorCode for ViewError {
    fn code(&self) -> Code {
        match self {
            ViewError::Invalid(_) => Code::InvalidPayload,
            ViewError::Data(e) => e.code(),
            ViewError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            ViewError::Invalid(e) => Cow::Borrowed(&e.message),
            ViewError::Data(e) => e.message(),
            ViewError::Store(e) => e.message(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            ViewError::Invalid(e) => Some(&e.field),
            ViewError::Data(e) => e.field(),
            ViewError::Store(e) => e.field(),
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            ViewError::Invalid(_) => None,
            ViewError::Data(e) => e.retry_after(),
            ViewError::Store(e) => e.retry_after(),
        }
    }
}
