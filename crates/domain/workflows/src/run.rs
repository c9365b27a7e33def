//! A run's state: RUNNING until it ends SUCCEEDED, FAILED or CANCELLED, and
//! the record of each step.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RunStatus {
    /// Steps are still to run.
    Running,
    /// Ended by a finish step or the last step.
    Succeeded,
    /// Ended by a fail step or a failing step.
    Failed,
    /// Ended at a step boundary after a cancellation request.
    Cancelled,
}

impl RunStatus {
    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "RUNNING",
            RunStatus::Succeeded => "SUCCEEDED",
            RunStatus::Failed => "FAILED",
            RunStatus::Cancelled => "CANCELLED",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "RUNNING" => Some(Self::Running),
            "SUCCEEDED" => Some(Self::Succeeded),
            "FAILED" => Some(Self::Failed),
            "CANCELLED" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// Why a run or a step failed: `{ code, message }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// UPPER_SNAKE code.
    pub code: String,
    /// Human text; never internals.
    pub message: String,
}

impl RunError {
    /// An error with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// Code of a run left by a process that died and could not be resumed.
pub const INTERRUPTED: &str = "WORKFLOW_INTERRUPTED";
/// Code of an http step refused by the address guard.
pub const HTTP_TARGET_FORBIDDEN: &str = "HTTP_TARGET_FORBIDDEN";
/// Code of an http step that could not complete.
pub const HTTP_REQUEST_FAILED: &str = "HTTP_REQUEST_FAILED";
/// Code of a step whose rendered input is unusable.
pub const STEP_INVALID: &str = "STEP_INVALID_INPUT";
/// Code of a `forEach` whose items are not an array or too many.
pub const INVALID_PAYLOAD: &str = "INVALID_PAYLOAD";
/// Code of a call too deep or back into its own chain.
pub const CALL_DEPTH: &str = "WORKFLOW_CALL_DEPTH";
/// Code of a call of a workflow not published or disabled.
pub const WORKFLOW_NOT_FOUND: &str = "WORKFLOW_NOT_FOUND";

/// One attempt of a step with `retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: DateTime<Utc>,
    /// Why it failed; null when it succeeded.
    pub error: Option<RunError>,
}

/// The record of one step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    /// The step id.
    pub id: String,
    /// The step type.
    #[serde(rename = "type")]
    pub kind: String,
    /// RUNNING (a delay under way), SUCCEEDED, FAILED, or CANCELLED (a delay cut short).
    pub status: RunStatus,
    /// The step's output.
    pub result: Value,
    /// Why it failed.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Inside loops: the index of each enclosing loop's iteration, outermost
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iteration: Vec<usize>,
    /// With `retry`: each attempt so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// A call step's child run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<Uuid>,
    /// A script step's `console.log` lines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
}

impl StepRecord {
    /// Whether this records step `id` at `iteration`.
    pub fn is(&self, id: &str, iteration: &[usize]) -> bool {
        self.id == id && self.iteration == iteration
    }
}

/// What a run ended with (or is at): `{ id, status, result, error }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The run id.
    pub id: Uuid,
    /// Where it stands.
    pub status: RunStatus,
    /// The finish step's result, else null.
    pub result: Value,
    /// Why it failed, else null.
    pub error: Option<RunError>,
}

/// A stored run, as the history shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run id.
    pub id: Uuid,
    /// Its workflow.
    pub workflow_id: Uuid,
    /// Where it stands.
    pub status: RunStatus,
    /// Started in test mode (the draft).
    pub test: bool,
    /// `start.data`, credential headers redacted.
    pub input: Value,
    /// The result.
    pub result: Value,
    /// The error.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Each step's outcome.
    pub steps: Vec<StepRecord>,
    /// The run whose call step started this one.
    pub parent_run_id: Option<Uuid>,
    /// The tick of a scheduled run.
    pub scheduled_at: Option<DateTime<Utc>>,
}
