//! The step executor: walks a definition's steps against the run's scope,
//! records each step, checkpoints after every step with an effect outside
//! the run (data, http, delay, call, a wait between attempts), renews the
//! run's lease while a step takes long, and stops at the next step boundary
//! once cancelled. `retry`, `onError`, loops (`forEach`, iterations at once
//! up to their concurrency) and child runs (`call`) are walked here too.
//! What it reaches outside the run goes through the traits of `ports`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use kernel::StoreError;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use uuid::Uuid;

use crate::condition;
use crate::model::{
    Action, Call, DELAY_MAX_MS, Definition, FOR_EACH_ITEMS_MAX, ForEach, HTTP_TIMEOUT_DEFAULT_MS,
    OnError, RETRY_WAIT_MAX_MS, Retry, Step,
};
use crate::run::{
    Attempt, HTTP_REQUEST_FAILED, INVALID_PAYLOAD, Outcome, RunError, RunStatus, STEP_INVALID,
    StepRecord,
};
use crate::template::{Context, descend, render};

mod calls;
mod effects;
mod for_each;
mod journal;
mod retry;
mod scope;
mod steps;
#[cfg(test)]
mod tests;

use scope::Scope;

pub use crate::ports::{
    ChildRequest, ChildRun, ChildRuns, Outbound, OutgoingRequest, Ports, RunJournal, RunUser,
    ScriptRunner, SettledScripts, StepData,
};

/// How often a call step reads the outcome of a child another instance runs.
const FOLLOW_CHILD_EVERY: Duration = Duration::from_millis(200);

/// One run to execute (or resume).
pub struct Execution {
    /// The run id.
    pub run_id: Uuid,
    /// This instance, holding the lease.
    pub owner: Uuid,
    /// The steps to run.
    pub definition: Arc<Definition>,
    /// `{ start: { data }, steps: {}, user }`.
    pub context: Value,
    /// Who data steps act as.
    pub user: RunUser,
    /// Whether http steps may reach private addresses.
    pub allow_private: bool,
    /// Steps recorded by an earlier attempt (resumption).
    pub recorded: Vec<StepRecord>,
    /// Set to true when the run is to stop at the next boundary.
    pub cancel: Arc<watch::Sender<bool>>,
    /// The workflows from the root run to this one (this run's last).
    pub chain: Vec<Uuid>,
    /// Where call steps start their child runs.
    pub children: Arc<dyn ChildRuns>,
    /// Steps the run may still take, its child runs' included.
    pub budget: Arc<AtomicI64>,
}

/// Most steps one run takes, loop iterations and child runs included.
pub const RUN_STEPS_MAX: i64 = 10_000;

/// A fresh budget of [`RUN_STEPS_MAX`] steps.
pub fn step_budget() -> Arc<AtomicI64> {
    Arc::new(AtomicI64::new(RUN_STEPS_MAX))
}

/// How a step (or a list of steps) ended.
enum Flow {
    /// Go on; the value is the step's result (a list's: its last step's).
    Next(Value),
    Finish(Value),
    Fail(RunError),
    Cancelled,
    /// The run's lease was lost: another instance goes on with it.
    Lost,
}

/// The context of a run: `start.data`, `steps` (empty) and `user`.
pub fn context(start_data: Value, user: Value) -> Value {
    json!({ "start": { "data": start_data }, "steps": {}, "user": user })
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A step record's identity: its step and iteration.
type RecordKey = (String, Vec<usize>);

/// The records of a run, in the order first written, found by key.
#[derive(Default)]
struct Records {
    list: Vec<StepRecord>,
    index: HashMap<RecordKey, usize>,
    /// Changes so far: a checkpoint that finds a newer write skips its own.
    changes: u64,
    /// The change at which each record of `list` last changed.
    changed: Vec<u64>,
}

/// One run's walk: what it was given, and the records it writes.
struct Walk<'e> {
    ports: &'e Ports,
    execution: &'e Execution,
    /// Records of an earlier process, by step id and iteration.
    earlier: HashMap<RecordKey, StepRecord>,
    records: Mutex<Records>,
    /// Serialises checkpoints and holds the changes the last one wrote.
    writing: tokio::sync::Mutex<u64>,
}

/// Runs `execution` to its end (or until its lease is lost: then `None`).
pub async fn execute(
    ports: &Ports,
    mut execution: Execution,
) -> Result<Option<Outcome>, StoreError> {
    let earlier = execution
        .recorded
        .drain(..)
        .map(|record| ((record.id.clone(), record.iteration.clone()), record))
        .collect();
    let mut scope = Scope {
        parent: None,
        vars: std::mem::take(&mut execution.context),
        iteration: Vec::new(),
        halt: None,
    };
    let definition = execution.definition.clone();
    let walk = Walk {
        ports,
        execution: &execution,
        earlier,
        records: Mutex::default(),
        writing: tokio::sync::Mutex::default(),
    };
    let (status, result, error) = match walk.list(&definition.steps, &mut scope).await? {
        Flow::Next(_) => (RunStatus::Succeeded, Value::Null, None),
        Flow::Finish(result) => (RunStatus::Succeeded, result, None),
        Flow::Fail(error) => (RunStatus::Failed, Value::Null, Some(error)),
        Flow::Cancelled => (RunStatus::Cancelled, Value::Null, None),
        Flow::Lost => return Ok(None),
    };
    let mut records = walk
        .records
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .list;
    // A delay, a wait between attempts or a child cut short ends with the run.
    for record in records
        .iter_mut()
        .filter(|r| r.status == RunStatus::Running)
    {
        record.status = status;
        record.finished_at = Some(ports.clock.now());
    }
    let outcome = Outcome {
        id: execution.run_id,
        status,
        result,
        error,
    };
    ports
        .journal
        .finish(execution.owner, &outcome, &records)
        .await?;
    Ok(Some(outcome))
}

impl Walk<'_> {
    fn cancelled(&self) -> bool {
        *self.execution.cancel.borrow()
    }

    /// Runs `steps` in order in `scope`.
    fn list<'s>(&'s self, steps: &'s [Step], scope: &'s mut Scope<'_>) -> Boxed<'s, Flow> {
        Box::pin(async move {
            let mut last = Value::Null;
            for step in steps {
                if self.cancelled() {
                    return Ok(Flow::Cancelled);
                }
                if scope.halted() {
                    return Ok(Flow::Next(Value::Null));
                }
                match self.step(step, scope).await? {
                    Flow::Next(result) => {
                        scope.set_step(&step.id, json!({ "result": result }));
                        last = result;
                        if let Action::Condition(c) = &step.action {
                            let branch = if last == Value::Bool(true) {
                                &c.then
                            } else {
                                &c.otherwise
                            };
                            if !branch.is_empty() {
                                match self.list(branch, scope).await? {
                                    Flow::Next(value) => last = value,
                                    other => return Ok(other),
                                }
                            }
                        }
                    }
                    Flow::Fail(error) => {
                        let handler = match &step.on_error {
                            OnError::Fail => return Ok(Flow::Fail(error)),
                            OnError::Continue => None,
                            OnError::Steps(handler) => Some(handler),
                        };
                        scope.set_step(&step.id, json!({ "result": null, "error": error }));
                        last = Value::Null;
                        if let Some(handler) = handler {
                            match self.list(handler, scope).await? {
                                Flow::Next(value) => last = value,
                                other => return Ok(other),
                            }
                        }
                    }
                    other => return Ok(other),
                }
            }
            Ok(Flow::Next(last))
        })
    }

    /// Runs one step with its attempts, records it, and checkpoints after
    /// an effect.
    async fn step(&self, step: &Step, scope: &mut Scope<'_>) -> Result<Flow, StoreError> {
        let key = (step.id.clone(), scope.iteration.clone());
        let earlier = self.earlier.get(&key);
        // A finished effect is never repeated: its result stands, and so
        // does a failure its onError handled (it did not end the run).
        let handled = !matches!(step.on_error, OnError::Fail);
        if let Some(done) = earlier.filter(|r| {
            !step.is_pure()
                && (r.status == RunStatus::Succeeded || (handled && r.status == RunStatus::Failed))
        }) {
            self.record(done.clone());
            return Ok(match &done.error {
                Some(error) if done.status == RunStatus::Failed => Flow::Fail(error.clone()),
                _ => Flow::Next(done.result.clone()),
            });
        }
        if self.execution.budget.fetch_sub(1, Ordering::Relaxed) <= 0 {
            return Ok(Flow::Fail(RunError::new(
                INVALID_PAYLOAD,
                format!(
                    "The run took more than {RUN_STEPS_MAX} steps (loop iterations and called workflows included)"
                ),
            )));
        }
        let started_at = self.ports.clock.now();
        let resumed = earlier.filter(|r| r.status == RunStatus::Running);
        let mut record = StepRecord {
            id: step.id.clone(),
            kind: step.action.type_name().to_owned(),
            status: RunStatus::Running,
            result: Value::Null,
            error: None,
            started_at: resumed.map_or(started_at, |r| r.started_at),
            finished_at: None,
            iteration: scope.iteration.clone(),
            attempts: resumed.map(|r| r.attempts.clone()).unwrap_or_default(),
            child_run_id: resumed.and_then(|r| r.child_run_id),
            logs: Vec::new(),
        };
        let flow = match &step.retry {
            None => self.action(step, scope, &mut record).await?,
            Some(retry) => self.attempts(step, retry, scope, &mut record).await?,
        };
        match &flow {
            Flow::Next(result) | Flow::Finish(result) => {
                record.status = RunStatus::Succeeded;
                record.result = result.clone();
                record.error = None;
            }
            Flow::Fail(error) => {
                record.status = RunStatus::Failed;
                record.result = Value::Null;
                record.error = Some(error.clone());
            }
            Flow::Cancelled | Flow::Lost => return Ok(flow),
        }
        record.finished_at = Some(self.ports.clock.now());
        self.record(record);
        // A condition's branch checkpoints its own effects.
        let effect = !step.is_pure() && !matches!(step.action, Action::Condition(_));
        if effect
            && !matches!(flow, Flow::Finish(_))
            && let Some(stop) = self.checkpoint().await?
        {
            return Ok(stop);
        }
        Ok(flow)
    }
}

/// `start.data` of a dbEvent run.
pub fn event_data(event: &str, resource: &str, old: Value, new: Value) -> Value {
    let mut map = Map::new();
    map.insert("event".into(), event.into());
    map.insert("resource".into(), resource.into());
    map.insert("old".into(), old);
    map.insert("new".into(), new);
    Value::Object(map)
}
