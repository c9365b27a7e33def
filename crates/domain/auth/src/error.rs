use std::borrow::Cow;

use kernel::{Code, ErrorCode, FieldError, StoreError};
use permissions::Denied;

/// Failures of authentication and account operations.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Any failed sign-in; deliberately says nothing about the reason.
    #[error("Invalid email or password")]
    InvalidCredentials,
    /// No usable credential on a protected route.
    #[error("A valid credential is required")]
    AuthenticationRequired,
    /// The session expired or was ended.
    #[error("The session has expired; sign in again")]
    SessionExpired,
    /// Right password, but the email must be verified first.
    #[error("The email address is not verified")]
    EmailNotVerified,
    /// A reset, verification or invitation token that is unknown, used or expired.
    #[error("The link is invalid or has expired")]
    InvalidToken,
    /// The first factor passed; a second is required to finish the
    /// sign-in with this challenge.
    #[error("A second factor is required")]
    MfaRequired {
        /// The challenge secret for `POST /api/auth/mfa/verify`.
        challenge: String,
    },
    /// An administrator's session needs a second factor on the account
    /// first (`auth.mfa_required_for_admins`).
    #[error("Set up a second factor (TOTP or a passkey) on your account first")]
    MfaEnrollmentRequired,
    /// A change of the factors of an account that has one, from a session
    /// that proved none (403 MFA_REQUIRED).
    #[error("Sign in with your second factor (a TOTP code or a passkey) to change your factors")]
    FactorProofRequired,
    /// A wrong code for a change of the caller's own factors (400).
    #[error("The code is wrong")]
    InvalidMfaCode,
    /// A wrong code at a sign-in challenge (401).
    #[error("The code is wrong")]
    MfaCodeRefused,
    /// The current password given for a change is wrong.
    #[error("The current password is wrong")]
    InvalidCurrentPassword,
    /// The caller may not use this route.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The caller may not do this particular thing.
    #[error("{0}")]
    PermissionDenied(&'static str),
    /// A field is missing or wrong.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The persistence layer failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Password hashing failed.
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// Every password hashing slot and queue place is taken; retry shortly.
    #[error("The service is busy; retry shortly")]
    Busy,
    /// Too many sign-in attempts or account calls from this source; retry
    /// after the seconds given.
    #[error("Too many attempts from this address; retry later")]
    RateLimited {
        /// Seconds until an attempt would be counted again.
        retry_after: u64,
    },
}

impl ErrorCode for AuthError {
    fn code(&self) -> Code {
        match self {
            AuthError::InvalidCredentials | AuthError::AuthenticationRequired => {
                Code::AuthenticationRequired
            }
            AuthError::SessionExpired => Code::SessionExpired,
            AuthError::EmailNotVerified => Code::EmailNotVerified,
            AuthError::InvalidToken => Code::InvalidToken,
            AuthError::InvalidCurrentPassword => Code::InvalidCurrentPassword,
            AuthError::MfaRequired { .. } => Code::MfaRequired,
            AuthError::InvalidMfaCode => Code::InvalidMfaCode,
            AuthError::MfaEnrollmentRequired => Code::MfaEnrollmentRequired,
            AuthError::FactorProofRequired => Code::FactorProofRequired,
            AuthError::MfaCodeRefused => Code::MfaCodeRefused,
            AuthError::Denied(_) | AuthError::PermissionDenied(_) => Code::PermissionDenied,
            AuthError::Invalid(e) => e.code(),
            AuthError::Store(e) => e.code(),
            AuthError::Hashing(_) => Code::Internal,
            AuthError::Busy => Code::Unavailable,
            AuthError::RateLimited { .. } => Code::RateLimitExceeded,
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            AuthError::Invalid(e) => e.message(),
            AuthError::Store(e) => e.message(),
            AuthError::Hashing(_) => "Internal error".into(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            AuthError::Invalid(e) => e.field(),
            AuthError::Store(e) => e.field(),
            _ => None,
        }
    }

    fn challenge(&self) -> Option<&str> {
        match self {
            AuthError::MfaRequired { challenge } => Some(challenge),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            AuthError::Busy => Some(1),
            AuthError::RateLimited { retry_after } => Some(*retry_after),
            _ => None,
        }
    }
}
