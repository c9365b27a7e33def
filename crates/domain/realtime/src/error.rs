//! Why a subscription is refused.

use std::borrow::Cow;

use data::DataError;
use kernel::{Code, ErrorCode, FieldError};

/// `Retry-After` past the per-user limit: a slot frees when a stream ends.
const STREAM_RETRY_SECONDS: u64 = 5;

/// Why a subscription is refused, before its stream starts.
#[derive(Debug, thiserror::Error)]
pub enum RealtimeError {
    /// What the list route would answer for one of the tables.
    #[error(transparent)]
    Data(#[from] DataError),
    /// `subscribe` is missing, empty or malformed.
    #[error("{}", .0.message)]
    Query(FieldError),
    /// `realtime.max_subscribers` streams are open on this instance.
    #[error("Too many realtime subscribers on this instance; retry later")]
    Full,
    /// `realtime.max_subscribers_per_user` streams of this user are open.
    #[error("Too many realtime streams of this user are open; close one or retry later")]
    TooManyStreams,
    /// The change log could not be read to start the stream.
    #[error("Realtime is unavailable right now; retry later")]
    Unready,
}

impl ErrorCode for RealtimeError {
    fn code(&self) -> Code {
        match self {
            RealtimeError::Data(e) => e.code(),
            RealtimeError::Query(_) => Code::InvalidQuery,
            RealtimeError::Full | RealtimeError::Unready => Code::Unavailable,
            RealtimeError::TooManyStreams => Code::RateLimitExceeded,
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            RealtimeError::Data(e) => e.message(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            RealtimeError::Data(e) => e.field(),
            RealtimeError::Query(e) => Some(&e.field),
            RealtimeError::Full | RealtimeError::Unready | RealtimeError::TooManyStreams => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            RealtimeError::Full | RealtimeError::Unready => Some(1),
            RealtimeError::TooManyStreams => Some(STREAM_RETRY_SECONDS),
            _ => None,
        }
    }
}
