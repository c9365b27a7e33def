//! Why a workflow request fails.

use std::borrow::Cow;

use auth::AuthError;
use kernel::{Code, ErrorCode, FieldError, StoreError};
use uuid::Uuid;

/// A refused or failed workflow request.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The definition or another input is wrong.
    #[error("{}", .0.message)]
    Invalid(#[from] FieldError),
    /// No workflow with that id (Admin API).
    #[error("not found")]
    NotFound,
    /// The webhook does not answer: unknown, unpublished, disabled, not a
    /// webhook, or the other method.
    #[error("No such workflow")]
    WebhookNotFound,
    /// A webhook POST body that is not a JSON object or array.
    #[error("The body must be a JSON object or array")]
    InvalidWebhookPayload,
    /// The credential is missing or refused.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The caller's roles lack the invoke grant.
    #[error("Your roles may not invoke this workflow")]
    ActionDenied,
    /// Too many public webhook calls from this address.
    #[error("Too many webhook calls; retry later")]
    RateLimited {
        /// Seconds until a call is accepted again.
        retry_after: u64,
    },
    /// A synchronous run did not finish within its wait.
    #[error("The run did not finish within the wait time")]
    SyncTimeout {
        /// The run, to ask for its result later.
        run: Uuid,
    },
    /// The result route knows no such run for this caller.
    #[error("No such run")]
    RunNotFound,
    /// A manual run or a replay of a workflow never published, or disabled.
    #[error("The workflow is not published, or it is disabled")]
    NotRunnable,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ErrorCode for WorkflowError {
    fn code(&self) -> Code {
        match self {
            WorkflowError::Invalid(_) => Code::InvalidPayload,
            WorkflowError::NotFound => Code::NotFound,
            WorkflowError::WebhookNotFound => Code::WorkflowNotFound,
            WorkflowError::InvalidWebhookPayload => Code::WorkflowWebhookInvalidPayload,
            WorkflowError::Auth(e) => e.code(),
            WorkflowError::ActionDenied => Code::ActionDenied,
            WorkflowError::RateLimited { .. } => Code::RateLimitExceeded,
            WorkflowError::SyncTimeout { .. } => Code::WorkflowSyncTimeout,
            WorkflowError::RunNotFound => Code::WorkflowRunNotFound,
            WorkflowError::NotRunnable => Code::Conflict,
            WorkflowError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            WorkflowError::Auth(e) => e.message(),
            WorkflowError::Store(e) => e.message(),
            WorkflowError::NotFound => "Not found".into(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            WorkflowError::Invalid(e) => Some(&e.field),
            WorkflowError::Store(e) => e.field(),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            WorkflowError::RateLimited { retry_after } => Some(*retry_after),
            WorkflowError::Auth(e) => e.retry_after(),
            WorkflowError::Store(e) => e.retry_after(),
            _ => None,
        }
    }

    fn meta(&self) -> Option<serde_json::Value> {
        match self {
            WorkflowError::SyncTimeout { run } => Some(serde_json::json!({ "run": run })),
            _ => None,
        }
    }
}
