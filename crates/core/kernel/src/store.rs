//! What every store implementation shares, whatever its backend: the
//! error it returns and how it has PostgreSQL plan its statements.

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
    /// A snapshot diff ran past its time limit and was stopped.
    #[error("the snapshot diff ran past its time limit")]
    DiffTooLarge,
    /// A database function raised an exception (`RAISE EXCEPTION`).
    #[error("the function raised: {message}")]
    FunctionRaised {
        /// The exception's message, at most 1000 characters.
        message: String,
        /// Its `USING HINT` when that is an UPPER_SNAKE word: the code sent.
        code: Option<String>,
    },
    /// A database function failed otherwise; the text goes to the logs only.
    #[error("the function failed: {0}")]
    FunctionFailed(String),
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
            StoreError::AnswerTooLarge | StoreError::DiffTooLarge => Code::InvalidQuery,
            StoreError::FunctionRaised { .. } => Code::FunctionRaised,
            StoreError::FunctionFailed(_) => Code::FunctionFailed,
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
            StoreError::FunctionRaised { message, .. } => Cow::Borrowed(message),
            StoreError::FunctionFailed(_) => "The function failed".into(),
            StoreError::AnswerTooLarge => "The answer is larger than this instance allows \
                 (data.max_answer_bytes); page with a smaller limit, or narrow it with \
                 select or a filter"
                .into(),
            StoreError::DiffTooLarge => "The snapshot is too large to diff at once (a diff \
                 stops after 30 s): split it, and diff and apply the parts one after another"
                .into(),
            StoreError::QueryTimeout => "The query ran longer than this instance allows \
                 (data.statement_timeout_ms); narrow it with a filter or a smaller limit"
                .into(),
        }
    }

    fn retry_after(&self) -> Option<u64> {
        matches!(self, StoreError::Unavailable(_) | StoreError::Stale).then_some(1)
    }

    fn code_text(&self) -> Option<&str> {
        match self {
            StoreError::FunctionRaised { code, .. } => code.as_deref(),
            _ => None,
        }
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

/// PostgreSQL's `plan_cache_mode` for the prepared statements of a pool.
///
/// Every statement is prepared once per connection. In PostgreSQL's `auto`
/// mode the planner keeps planning it anew for each execution whenever its
/// estimate of a plan for the given values is a little lower than of the
/// reusable plan, which for the Data API's indexed reads is nearly always:
/// the planning then costs about a third of PostgreSQL's time for the read.
/// `ForceGenericPlan` plans each statement once per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanCacheMode {
    /// PostgreSQL's default choice between the two.
    Auto,
    /// Plan once, reuse for every value.
    ForceGenericPlan,
    /// Plan every execution for its values.
    ForceCustomPlan,
}

impl PlanCacheMode {
    /// The setting's value as PostgreSQL names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::ForceGenericPlan => "force_generic_plan",
            Self::ForceCustomPlan => "force_custom_plan",
        }
    }
}

impl std::str::FromStr for PlanCacheMode {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        [Self::Auto, Self::ForceGenericPlan, Self::ForceCustomPlan]
            .into_iter()
            .find(|mode| mode.as_str() == value)
            .ok_or_else(|| {
                format!("unknown plan cache mode {value:?} (auto, force_generic_plan or force_custom_plan)")
            })
    }
}

/// What an operator watches, for the metrics endpoint: the outbox, the
/// workflow queue and the connection pool.
#[derive(Debug, Clone, Copy)]
pub struct Operations {
    /// Emails not sent yet.
    pub outbox_waiting: i64,
    /// Age of the oldest of them, in seconds (0 when none waits).
    pub outbox_oldest_seconds: f64,
    /// Workflow runs RUNNING on any instance.
    pub runs_running: i64,
    /// Row events no run has been started for yet.
    pub row_events_waiting: i64,
    /// Connections this instance's pool holds.
    pub pool_size: u32,
    /// Of which idle.
    pub pool_idle: usize,
}
