//! Workflows, their runs and outcomes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// `POST /admin/api/workflows` and `PATCH /admin/api/workflows/{id}` body
/// (the definition of a workflow); PATCH changes only what it names.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowRequest {
    /// URL segment of the webhook: lower-case letters, digits and `-`.
    pub slug: Option<String>,
    /// Display name (default: the slug).
    pub name: Option<String>,
    /// Disabled workflows do not run (default true).
    pub enabled: Option<bool>,
    /// `{ type: webhook, method, response, waitSeconds, onTimeout, access, executeAs }`
    /// or `{ type: dbEvent, resourceId, events, executeAs }`.
    pub trigger: Option<Value>,
    /// The steps, in order: `{ id, type, ... }`.
    pub steps: Option<Value>,
}

/// A workflow; `trigger` and `steps` are the draft.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// Workflow id.
    pub id: Uuid,
    /// URL segment of the webhook.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Whether it runs.
    pub enabled: bool,
    /// Whether a published version exists.
    pub published: bool,
    /// When the draft was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// The draft's trigger.
    pub trigger: Value,
    /// The draft's steps.
    pub steps: Value,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// Why a run failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunError {
    /// UPPER_SNAKE code.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// A run's outcome: `{ id, status, result, error }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunOutcome {
    /// Run id.
    pub id: Uuid,
    /// RUNNING, SUCCEEDED, FAILED or CANCELLED.
    pub status: String,
    /// What the run ended with.
    pub result: Value,
    /// Why it failed, else null.
    pub error: Option<RunError>,
}

/// An asynchronous webhook's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunStarted {
    /// The run id, for the result route.
    pub run: Uuid,
}

/// One step of a stored run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    /// Step id.
    pub id: String,
    /// Step type.
    #[serde(rename = "type")]
    pub kind: String,
    /// RUNNING, SUCCEEDED or FAILED.
    pub status: String,
    /// Its output.
    pub result: Value,
    /// Why it failed.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Inside loops: each enclosing iteration's index, outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iteration: Vec<usize>,
    /// With `retry`: each attempt.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<RunAttempt>,
    /// A call step's child run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<Uuid>,
    /// A script step's `console.log` lines (redacted as the run is).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
}

/// A test run's outcome with its steps (their results and logs).
#[derive(Debug, Serialize, ToSchema)]
pub struct TestRunOutcome {
    /// The outcome.
    #[serde(flatten)]
    pub outcome: RunOutcome,
    /// Each step as stored.
    pub steps: Vec<RunStep>,
}

/// One attempt of a step with `retry`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAttempt {
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: DateTime<Utc>,
    /// Why it failed; null when it succeeded.
    pub error: Option<RunError>,
}

/// A stored run, as the history lists it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    /// Run id.
    pub id: Uuid,
    /// Its workflow.
    pub workflow_id: Uuid,
    /// RUNNING, SUCCEEDED, FAILED or CANCELLED.
    pub status: String,
    /// Started in test mode (the draft).
    pub test: bool,
    /// `start.data` with credential headers redacted.
    pub input: Value,
    /// What it ended with.
    pub result: Value,
    /// Why it failed.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Each step's outcome.
    pub steps: Vec<RunStep>,
    /// The run whose call step started this one.
    pub parent_run_id: Option<Uuid>,
    /// The tick of a scheduled run.
    pub scheduled_at: Option<DateTime<Utc>>,
}

/// `POST /admin/api/workflows/{id}/run` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ManualRunRequest {
    /// The run's `start.data`.
    #[serde(default)]
    pub input: Value,
}

/// A run just started: `{ run }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StartedRun {
    /// The run, RUNNING.
    pub run: WorkflowRun,
}

/// `POST /admin/api/workflows/schedule-preview` body: a schedule trigger.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulePreviewRequest {
    /// `{ type: "schedule", cron, timezone?, catchUp?, executeAs }`.
    pub trigger: Value,
}

/// The next ticks of a schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct SchedulePreview {
    /// The next five ticks, RFC 3339 in UTC.
    pub next: Vec<DateTime<Utc>>,
}

/// `POST /admin/api/workflows/{id}/test` body: the trigger input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRunRequest {
    /// Query parameters.
    pub query: Option<Value>,
    /// The body.
    pub body: Option<Value>,
    /// `{ ip, headers }`.
    pub meta: Option<Value>,
}

/// Query of `GET /admin/api/workflows/{id}/runs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunListQuery {
    /// Most runs (1..1000, default 50).
    pub limit: Option<u64>,
    /// Runs skipped.
    pub offset: Option<u64>,
}
