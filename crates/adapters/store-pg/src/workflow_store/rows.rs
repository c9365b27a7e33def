//! The rows of workflows and runs as their statements answer them.

use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::{FromQueryResult, QueryResult};
use serde_json::Value as Json;
use uuid::Uuid;
use workflows::run::{Outcome, RunError, RunStatus, StepRecord};
use workflows::store::{ClaimedRun, WorkflowRecord};

use crate::rows;

/// A row of `WORKFLOW_COLUMNS`.
#[derive(FromQueryResult)]
pub(super) struct WorkflowRow {
    id: Uuid,
    slug: String,
    name: String,
    enabled: bool,
    draft: Json,
    published: Option<Json>,
    published_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<WorkflowRow> for WorkflowRecord {
    fn from(r: WorkflowRow) -> Self {
        Self {
            id: r.id,
            slug: r.slug,
            name: r.name,
            enabled: r.enabled,
            draft: r.draft,
            published: r.published,
            published_at: r.published_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

pub(super) fn workflow(row: &QueryResult) -> Result<WorkflowRecord, StoreError> {
    Ok(rows::row::<WorkflowRow>(row)?.into())
}

pub(super) fn status(text: &str) -> Result<RunStatus, StoreError> {
    RunStatus::parse(text).ok_or_else(|| StoreError::Internal(format!("stored run status {text}")))
}

/// A run's stored outcome: `id, status, result, error`.
#[derive(FromQueryResult)]
pub(super) struct OutcomeRow {
    id: Uuid,
    status: String,
    result: Option<Json>,
    error: Option<Json>,
}

/// A run's outcome from its `id, status, result, error` columns.
pub(super) fn outcome(row: &QueryResult) -> Result<Outcome, StoreError> {
    let r = rows::row::<OutcomeRow>(row)?;
    Ok(Outcome {
        id: r.id,
        status: status(&r.status)?,
        result: r.result.unwrap_or(Json::Null),
        error: error_of(r.error),
    })
}

pub(super) fn error_of(error: Option<Json>) -> Option<RunError> {
    error.and_then(|e| serde_json::from_value(e).ok())
}

/// A run's step records as stored: checkpoints append, so a later record
/// of a step and iteration replaces an earlier one, in the earlier's place.
pub(super) fn steps_of(steps: Json) -> Result<Vec<StepRecord>, StoreError> {
    let appended: Vec<StepRecord> =
        serde_json::from_value(steps).map_err(|e| StoreError::Internal(e.to_string()))?;
    let mut records: Vec<StepRecord> = Vec::with_capacity(appended.len());
    let mut at = std::collections::HashMap::new();
    for record in appended {
        let key = (record.id.clone(), record.iteration.clone());
        match at.get(&key) {
            Some(&i) => records[i] = record,
            None => {
                at.insert(key, records.len());
                records.push(record);
            }
        }
    }
    Ok(records)
}

/// A row of `CLAIMED_COLUMNS`.
#[derive(FromQueryResult)]
pub(super) struct ClaimedRow {
    id: Uuid,
    definition: Json,
    input: Json,
    run_as: Uuid,
    steps: Json,
    attempts: i32,
    chain: Vec<Uuid>,
}

pub(super) fn claimed(row: &QueryResult) -> Result<ClaimedRun, StoreError> {
    let r = rows::row::<ClaimedRow>(row)?;
    Ok(ClaimedRun {
        id: r.id,
        definition: r.definition,
        input: r.input,
        run_as: r.run_as,
        steps: steps_of(r.steps)?,
        attempts: r.attempts,
        chain: r.chain,
    })
}

/// The workflow a webhook call found, with the wait its rate limit asks.
#[derive(FromQueryResult)]
pub(super) struct WebhookRow {
    pub(super) id: Uuid,
    pub(super) published: Json,
    pub(super) roles: Vec<Uuid>,
    pub(super) wait: i64,
}

/// A run's user with the roles that decide its data steps.
#[derive(FromQueryResult)]
pub(super) struct RunUserRow {
    pub(super) id: Uuid,
    pub(super) active: bool,
    pub(super) email: String,
    pub(super) name: Option<String>,
    pub(super) timezone: Option<String>,
    pub(super) role_ids: Vec<Uuid>,
    pub(super) api_access: bool,
    pub(super) admin: bool,
}

/// A run as the Admin API lists it.
#[derive(FromQueryResult)]
pub(super) struct RunRow {
    pub(super) id: Uuid,
    pub(super) workflow_id: Uuid,
    pub(super) status: String,
    pub(super) test: bool,
    pub(super) input: Json,
    pub(super) result: Option<Json>,
    pub(super) error: Option<Json>,
    pub(super) steps: Json,
    pub(super) started_at: DateTime<Utc>,
    pub(super) finished_at: Option<DateTime<Utc>>,
    pub(super) parent_run_id: Option<Uuid>,
    pub(super) scheduled_at: Option<DateTime<Utc>>,
}

/// A published schedule with its next tick.
#[derive(FromQueryResult)]
pub(super) struct ScheduleRow {
    pub(super) id: Uuid,
    pub(super) published: Json,
    pub(super) schedule_next_at: DateTime<Utc>,
}
