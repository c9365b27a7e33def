//! What workflows ask of their store: definitions, runs, leases, row events
//! and the shared rate limit. PostgreSQL implements it in `store-pg`.

use std::time::Duration;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::StoreError;
use serde_json::Value;
use uuid::Uuid;

use crate::engine::RunJournal;
use crate::run::{Outcome, RunRecord, StepRecord};

/// A stored workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRecord {
    /// Its id.
    pub id: Uuid,
    /// The webhook path segment.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Disabled workflows do not run.
    pub enabled: bool,
    /// `{ trigger, steps }` being edited.
    pub draft: Value,
    /// `{ trigger, steps }` that runs, once published.
    pub published: Option<Value>,
    /// When it was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A workflow to create.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// Its id.
    pub id: Uuid,
    /// The webhook path segment.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Whether it runs once published.
    pub enabled: bool,
    /// `{ trigger, steps }`.
    pub draft: Value,
}

/// Changes to a workflow; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct WorkflowChanges {
    /// New slug.
    pub slug: Option<String>,
    /// New name.
    pub name: Option<String>,
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// New draft.
    pub draft: Option<Value>,
}

/// A database-event trigger of a published snapshot: what starts its runs.
#[derive(Debug, Clone)]
pub struct EventTarget {
    /// The watched table's resource.
    pub resource_id: Uuid,
    /// `insert`, `update`, `delete`.
    pub events: Vec<String>,
}

/// A webhook call to look up: the workflow behind `slug`, and for a public
/// one called with its method, a call taken from the address's allowance.
#[derive(Debug, Clone, Copy)]
pub struct WebhookLookup<'a> {
    /// The slug.
    pub slug: &'a str,
    /// `POST` or `GET`.
    pub method: &'a str,
    /// The rate-limit key of the caller's address.
    pub rate_key: &'a str,
    /// How a stored trigger names public access (counted against the limit).
    pub public_access: &'a str,
    /// The access of a trigger that names none.
    pub default_access: &'a str,
    /// The method of a trigger that names none.
    pub default_method: &'a str,
    /// The setting holding the public calls allowed per minute and address.
    pub rate_limit_key: &'a str,
    /// That limit while the setting is not stored.
    pub rate_limit_default: i64,
}

/// The published webhook behind a slug, as one call sees it.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    /// The workflow.
    pub workflow_id: Uuid,
    /// Its published `{ trigger, steps }`.
    pub definition: Value,
    /// The roles holding its invoke grant.
    pub invoke_roles: Vec<Uuid>,
    /// For a public call over `workflows.public_rate_limit_per_minute`:
    /// the seconds until one is accepted again.
    pub retry_after: Option<u64>,
}

/// The user a run acts as, read afresh.
#[derive(Debug, Clone)]
pub struct RunUserRecord {
    /// The auth version it was read at.
    pub auth_version: i64,
    /// Whether the account is active.
    pub active: bool,
    /// Its roles.
    pub role_ids: Vec<Uuid>,
    /// Some role gives API access.
    pub api_access: bool,
    /// Member of Administrators.
    pub admin: bool,
    /// Its time zone preference.
    pub timezone: Option<String>,
    /// `{ id, email, name, timezone }`: `user` in templates.
    pub profile: Value,
}

/// A run to insert, leased to the starting instance.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// The run id.
    pub id: Uuid,
    /// Its workflow.
    pub workflow_id: Uuid,
    /// Started in test mode.
    pub test: bool,
    /// The `{ trigger, steps }` it runs.
    pub definition: Value,
    /// `start.data`, redacted.
    pub input: Value,
    /// The user it acts as.
    pub run_as: Uuid,
    /// The authenticated caller, if any.
    pub caller_id: Option<Uuid>,
    /// The starting instance.
    pub owner: Uuid,
    /// How long the lease lasts without renewal.
    pub lease: Duration,
    /// The run whose call step started it.
    pub parent_run_id: Option<Uuid>,
    /// The workflows of its calling chain, its own last.
    pub chain: Vec<Uuid>,
}

/// A run this instance has taken over (or started from a row event).
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    /// The run id.
    pub id: Uuid,
    /// The `{ trigger, steps }` it runs.
    pub definition: Value,
    /// `start.data` as stored.
    pub input: Value,
    /// The user it acts as.
    pub run_as: Uuid,
    /// Steps recorded so far.
    pub steps: Vec<StepRecord>,
    /// How many processes have executed it, this one included.
    pub attempts: i32,
    /// The workflows of its calling chain, its own last.
    pub chain: Vec<Uuid>,
}

/// A published, enabled workflow's snapshot.
#[derive(Debug, Clone)]
pub struct PublishedWorkflow {
    /// The workflow.
    pub id: Uuid,
    /// Its published `{ trigger, steps }`.
    pub definition: Value,
}

/// A published, enabled schedule: its snapshot and its next tick.
#[derive(Debug, Clone)]
pub struct ScheduleRecord {
    /// The workflow.
    pub id: Uuid,
    /// Its published `{ trigger, steps }`.
    pub definition: Value,
    /// The next tick not yet run.
    pub next_at: DateTime<Utc>,
}

/// The ticks of one schedule to run, claimed by moving its next tick on.
#[derive(Debug, Clone)]
pub struct TickClaim {
    /// The workflow.
    pub workflow_id: Uuid,
    /// The next tick as read; another instance that moved it first wins.
    pub expected: DateTime<Utc>,
    /// The next tick after these.
    pub next_at: DateTime<Utc>,
    /// The ticks to start a run for.
    pub ticks: Vec<DateTime<Utc>>,
    /// The user the runs act as.
    pub run_as: Uuid,
}

/// A stored run to start again: its input and user.
#[derive(Debug, Clone)]
pub struct StoredStart {
    /// `start.data` as stored (redacted).
    pub input: Value,
    /// The user it acted as.
    pub run_as: Uuid,
}

/// Who asks for a run's result.
#[derive(Debug, Clone, Copy)]
pub struct ResultAsker<'a> {
    /// The caller's user.
    pub user_id: Uuid,
    /// The caller's roles.
    pub role_ids: &'a [Uuid],
    /// Administrators hold every invoke grant.
    pub admin: bool,
}

/// Workflow definitions: the Admin API's routes, the published version a call or a snapshot names.
#[async_trait]
pub trait DefinitionStore: Send + Sync {
    /// Every workflow, by name.
    async fn workflows(&self) -> Result<Vec<WorkflowRecord>, StoreError>;
    /// One workflow.
    async fn workflow(&self, id: Uuid) -> Result<Option<WorkflowRecord>, StoreError>;
    /// Creates a workflow (CONFLICT on a taken slug).
    async fn create_workflow(
        &self,
        new: NewWorkflow,
        event: AuditEvent,
    ) -> Result<WorkflowRecord, StoreError>;
    /// Changes a workflow; `None` when unknown.
    async fn update_workflow(
        &self,
        id: Uuid,
        changes: WorkflowChanges,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError>;
    /// Deletes a workflow with its grants and runs; false when unknown.
    async fn delete_workflow(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
    /// Copies `snapshot` to the published version; a database-event target
    /// starts capturing its table's row changes in the same transaction,
    /// and a schedule's first tick is set (cleared for other triggers).
    async fn publish(
        &self,
        id: Uuid,
        snapshot: Value,
        target: Option<EventTarget>,
        schedule_next_at: Option<DateTime<Utc>>,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError>;
    /// The published, enabled workflow behind `slug`.
    async fn published_workflow(&self, slug: &str)
    -> Result<Option<PublishedWorkflow>, StoreError>;
    /// Whether an active user has this id.
    async fn user_exists(&self, id: Uuid) -> Result<bool, StoreError>;
    /// Whether a resource has this id.
    async fn resource_exists(&self, id: Uuid) -> Result<bool, StoreError>;
    /// The published, enabled workflow of a call's slug; a public one
    /// called with its method takes a call from the address's allowance
    /// (atomically, for every instance). The same round trip reads the
    /// shared state's versions, so cached settings are current.
    async fn webhook(&self, call: WebhookLookup<'_>) -> Result<Option<WebhookTarget>, StoreError>;
}

/// Runs as their callers see them: started, recorded, cancelled, their results and history.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// The user a run acts as.
    async fn run_user(&self, id: Uuid) -> Result<Option<RunUserRecord>, StoreError>;
    /// Stores a new RUNNING run.
    async fn start_run(&self, run: NewRun) -> Result<(), StoreError>;
    /// Stores a run that ended as soon as it started (only pure steps).
    async fn record_run(
        &self,
        run: &NewRun,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), StoreError>;
    /// Asks the run to stop at its next step boundary.
    async fn request_cancel(&self, run: Uuid) -> Result<(), StoreError>;
    /// The outcome of a run for the result route's rules (the caller's own,
    /// running or finished within 24 hours, invoke grant still held).
    async fn run_result(
        &self,
        run: Uuid,
        asker: ResultAsker<'_>,
    ) -> Result<Option<Outcome>, StoreError>;
    /// A run's stored outcome, whoever asks (the instance that started it
    /// follows it there after losing its lease).
    async fn run_outcome(&self, run: Uuid) -> Result<Option<Outcome>, StoreError>;
    /// A workflow's runs, newest first.
    async fn runs(
        &self,
        workflow_id: Uuid,
        limit: u64,
        offset: u64,
    ) -> Result<Vec<RunRecord>, StoreError>;
    /// A run of `workflow_id`: its stored input and user.
    async fn stored_start(
        &self,
        workflow_id: Uuid,
        run: Uuid,
    ) -> Result<Option<StoredStart>, StoreError>;
}

/// What the workflow worker claims and sweeps: schedule ticks, orphaned runs, row events, ended rate windows, old runs, the leases of a stopping instance.
#[async_trait]
pub trait WorkerStore: Send + Sync {
    /// Sets a schedule's next tick (a workflow enabled again starts afresh),
    /// when it still holds `expected` (any, when none is given).
    async fn set_schedule(
        &self,
        id: Uuid,
        next_at: Option<DateTime<Utc>>,
        expected: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;
    /// Records a scheduler pass of any instance; answers when the one
    /// before it ran.
    async fn schedule_pass(&self) -> Result<DateTime<Utc>, StoreError>;
    /// Published, enabled schedules whose next tick is at most `within`
    /// from now, the soonest first.
    async fn schedules(
        &self,
        within: Duration,
        limit: u64,
    ) -> Result<Vec<ScheduleRecord>, StoreError>;
    /// Moves a schedule's next tick on and starts one run per tick, leased
    /// to `owner`; nothing when another instance moved it first.
    async fn claim_ticks(
        &self,
        claim: TickClaim,
        owner: Uuid,
        lease: Duration,
    ) -> Result<Vec<ClaimedRun>, StoreError>;
    /// Takes over up to `limit` RUNNING runs whose lease expired.
    async fn claim_orphans(
        &self,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError>;
    /// Consumes up to `limit` row events, starting one run per listening
    /// workflow in the same transaction.
    async fn claim_events(
        &self,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError>;
    /// Deletes rate-limit windows that ended (every key, up to a batch).
    async fn clear_ended_limits(&self) -> Result<u64, StoreError>;
    /// Ends every lease `owner` holds (a stopping instance), so that any
    /// instance takes those runs over at once; answers how many.
    async fn release_leases(&self, owner: Uuid) -> Result<u64, StoreError>;
    /// Deletes runs that finished more than `days` ago.
    async fn purge_runs(&self, days: i64) -> Result<u64, StoreError>;
}

/// Persistence of workflows and runs: every part, as one store.
pub trait WorkflowStore: RunJournal + DefinitionStore + RunStore + WorkerStore {}

impl<T: RunJournal + DefinitionStore + RunStore + WorkerStore + ?Sized> WorkflowStore for T {}
