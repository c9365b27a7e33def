//! What the step executor reaches outside the run: the Data API for data
//! steps, outgoing HTTP, the script sandbox, the journal where progress is
//! written, and time.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kernel::{Clock, StoreError};
use serde_json::Value;
use uuid::Uuid;

use crate::model::Definition;
use crate::run::{Outcome, RunError, StepRecord};

/// Who a run's data steps act as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunUser {
    /// The run.
    pub run_id: Uuid,
    /// The user whose grants apply.
    pub user_id: Uuid,
}

/// Data steps, under the run user's permissions (the Data API's rules).
#[async_trait]
pub trait StepData: Send + Sync + 'static {
    /// `query`: the rows, as the list route's `data`.
    async fn query(
        &self,
        user: RunUser,
        resource: &str,
        filter: Option<&Value>,
        sort: Option<String>,
        limit: Option<String>,
    ) -> Result<Value, RunError>;
    /// `insert`: the row or rows written.
    async fn insert(&self, user: RunUser, resource: &str, data: &Value) -> Result<Value, RunError>;
    /// `update`: the row written.
    async fn update(
        &self,
        user: RunUser,
        resource: &str,
        key: &str,
        data: &Value,
    ) -> Result<Value, RunError>;
    /// `delete`: `{ deleted: true }`.
    async fn delete(&self, user: RunUser, resource: &str, key: &str) -> Result<Value, RunError>;
}

/// An outgoing request of the http step, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingRequest {
    /// The method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The JSON body, if any.
    pub body: Option<Value>,
    /// When to give up.
    pub timeout: Duration,
    /// Signs the body when set: the secret, and the time the signature
    /// names (from the engine's clock).
    pub signing: Option<(String, chrono::DateTime<chrono::Utc>)>,
    /// Whether loopback, private and link-local targets are allowed.
    pub allow_private: bool,
}

/// Outgoing HTTP for the http step.
#[async_trait]
pub trait Outbound: Send + Sync + 'static {
    /// Sends `request`; answers `{ status, headers, body }`.
    async fn send(&self, request: OutgoingRequest) -> Result<Value, RunError>;
}

/// What the executor writes as a run progresses.
#[async_trait]
pub trait RunJournal: Send + Sync + 'static {
    /// Appends `steps` (the records new or changed since the last
    /// checkpoint; a later record of a step and iteration replaces an
    /// earlier one when read) and renews the lease while `owner` holds it;
    /// answers `Some(cancel requested)`, or `None` when the run is no
    /// longer this owner's (taken over, or ended).
    async fn checkpoint(
        &self,
        run: Uuid,
        owner: Uuid,
        steps: &[StepRecord],
    ) -> Result<Option<bool>, StoreError>;
    /// Renews the lease while `owner` holds it; answers as [`RunJournal::checkpoint`].
    async fn renew(&self, run: Uuid, owner: Uuid) -> Result<Option<bool>, StoreError>;
    /// Ends the run with `outcome` and `steps` while `owner` holds it.
    async fn finish(
        &self,
        owner: Uuid,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), StoreError>;
    /// `value` as this journal would store it, for a run that recorded
    /// `steps` (a child run's input).
    fn stored(&self, value: &Value, steps: &[StepRecord]) -> Value {
        let _ = steps;
        value.clone()
    }
    /// The journal of a child of a run that recorded `steps`: it stores
    /// nothing this one would not.
    fn child(self: Arc<Self>, steps: &[StepRecord]) -> Arc<dyn RunJournal>;
}

/// The executor's collaborators.
#[derive(Clone)]
pub struct Ports {
    /// Data steps.
    pub data: Arc<dyn StepData>,
    /// The http step.
    pub outbound: Arc<dyn Outbound>,
    /// The script step.
    pub scripts: Arc<dyn ScriptRunner>,
    /// Where progress is written.
    pub journal: Arc<dyn RunJournal>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// How often a long step renews the lease.
    pub renew_every: Duration,
}

/// Script steps: the sandbox's pool at the size of
/// `workflows.script_concurrency` now.
#[async_trait]
pub trait ScriptRunner: Send + Sync + 'static {
    /// Runs `code` with `input` within `limits`.
    async fn run(&self, code: Arc<str>, input: Value, limits: scripts::Limits) -> scripts::Outcome;
}

/// The pool sized by the setting, read (from its cache) at each run.
pub struct SettledScripts {
    /// The pool.
    pub pool: scripts::ScriptPool,
    /// Where `workflows.script_concurrency` is read.
    pub settings: settings::SettingsService,
}

#[async_trait]
impl ScriptRunner for SettledScripts {
    async fn run(&self, code: Arc<str>, input: Value, limits: scripts::Limits) -> scripts::Outcome {
        let size = match self.settings.current().await {
            Ok(settings) => settings.script_concurrency(),
            // Settings unreadable for a moment: the size it has.
            Err(_) => self.pool.size(),
        };
        self.pool.run(size, code, input, limits).await
    }
}

/// A child run a call step asks for.
#[derive(Debug, Clone)]
pub struct ChildRequest<'a> {
    /// The calling run.
    pub parent: Uuid,
    /// The workflows of the calling chain, the root's first, the caller's last.
    pub chain: &'a [Uuid],
    /// The called workflow's slug.
    pub slug: &'a str,
    /// The child's `start.data`, as stored (secrets of the run redacted).
    pub input: &'a Value,
    /// The user the child acts as (the caller's).
    pub run_as: Uuid,
}

/// A child run stored and leased to this instance, ready to execute.
#[derive(Debug, Clone)]
pub struct ChildRun {
    /// The child run.
    pub run_id: Uuid,
    /// The published definition it runs.
    pub definition: Arc<Definition>,
    /// Its chain: the caller's with the child's workflow last.
    pub chain: Vec<Uuid>,
    /// `user` in its templates (the profile when its steps read it).
    pub user: Value,
}

/// Child runs of call steps: started in the store (or refused with the
/// run error the call step fails with), and followed to their end.
#[async_trait]
pub trait ChildRuns: Send + Sync + 'static {
    /// Stores a RUNNING child run, or refuses the call (unknown, disabled or
    /// unpublished workflow; too deep; a cycle).
    async fn start(
        &self,
        request: ChildRequest<'_>,
    ) -> Result<Result<ChildRun, RunError>, StoreError>;
    /// A run's stored outcome.
    async fn outcome(&self, run: Uuid) -> Result<Option<Outcome>, StoreError>;
}
