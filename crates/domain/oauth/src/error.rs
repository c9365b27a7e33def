use std::borrow::Cow;

use auth::AuthError;
use kernel::{Code, ErrorCode, FieldError, StoreError};

/// Failures of the provider sign-in routes that are answered, not redirected.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// Unknown or disabled provider, or an unknown identity.
    #[error("Not found")]
    NotFound,
    /// A state that is unknown, forged, used, expired or another provider's:
    /// its `redirect_to` cannot be trusted, so nothing is redirected.
    #[error("The sign-in state is invalid, used or expired; start again")]
    InvalidState,
    /// A bad `redirect_to`.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// Sign-in refused before the flow started (rate limit) or a store failure.
    #[error(transparent)]
    Auth(#[from] AuthError),
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> Self {
        OAuthError::Auth(e.into())
    }
}

impl ErrorCode for OAuthError {
    fn code(&self) -> Code {
        match self {
            OAuthError::NotFound => Code::NotFound,
            OAuthError::InvalidState => Code::InvalidToken,
            OAuthError::Invalid(e) => e.code(),
            OAuthError::Auth(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            OAuthError::Invalid(e) => e.message(),
            OAuthError::Auth(e) => e.message(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            OAuthError::Invalid(e) => e.field(),
            OAuthError::Auth(e) => e.field(),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            OAuthError::Auth(e) => e.retry_after(),
            _ => None,
        }
    }
}
