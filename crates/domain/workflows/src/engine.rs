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

pub use crate::ports::{
    ChildRequest, ChildRun, ChildRuns, Outbound, OutgoingRequest, Ports, RunJournal, RunUser,
    StepData,
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

/// What templates see: the run's context, or a loop iteration's `item`,
/// `index` and `steps` over the scope it runs in.
struct Scope<'p> {
    parent: Option<&'p Scope<'p>>,
    /// An object: the run's context, or `{ item, index, steps }`.
    vars: Value,
    /// The index of each enclosing iteration, outermost first.
    iteration: Vec<usize>,
    /// Set when a sibling iteration ended the loop: take no further step.
    halt: Option<&'p AtomicBool>,
}

impl Scope<'_> {
    fn halted(&self) -> bool {
        let mut scope = Some(self);
        while let Some(at) = scope {
            if at.halt.is_some_and(|h| h.load(Ordering::Relaxed)) {
                return true;
            }
            scope = at.parent;
        }
        false
    }

    fn set_step(&mut self, id: &str, entry: Value) {
        if let Some(steps) = self.vars.get_mut("steps").and_then(Value::as_object_mut) {
            steps.insert(id.to_owned(), entry);
        }
    }
}

impl Context for Scope<'_> {
    fn value_at(&self, path: &str) -> Option<&Value> {
        let mut segments = path.split('.');
        let root = segments.next()?;
        let mut scope = Some(self);
        if root == "steps" {
            let Some(id) = segments.next() else {
                return self.vars.get("steps");
            };
            while let Some(at) = scope {
                if let Some(entry) = at.vars.get("steps").and_then(|steps| steps.get(id)) {
                    return descend(entry, segments);
                }
                scope = at.parent;
            }
            return None;
        }
        while let Some(at) = scope {
            if let Some(value) = at.vars.get(root) {
                return descend(value, segments);
            }
            scope = at.parent;
        }
        None
    }
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

    /// Attempts a step with `retry` until one succeeds or the last fails,
    /// each failed attempt recorded (and checkpointed) before the wait.
    async fn attempts(
        &self,
        step: &Step,
        retry: &Retry,
        scope: &mut Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        loop {
            if let Some(last) = record.attempts.last() {
                let wait = retry_wait(retry, record.attempts.len());
                let until = last.finished_at + chrono::Duration::milliseconds(wait as i64);
                let remaining = (until - self.ports.clock.now()).num_milliseconds().max(0) as u64;
                if let Err(stop) = self
                    .watched(tokio::time::sleep(Duration::from_millis(remaining)))
                    .await?
                {
                    return Ok(stop);
                }
            }
            let began = self.ports.clock.now();
            let flow = self.action(step, scope, record).await?;
            let error = match flow {
                Flow::Fail(error) => error,
                Flow::Next(ref result) => {
                    if let Some(error) = failed_answer(step, result) {
                        error
                    } else {
                        record
                            .attempts
                            .push(attempt(began, self.ports.clock.now(), None));
                        return Ok(flow);
                    }
                }
                other => return Ok(other),
            };
            record
                .attempts
                .push(attempt(began, self.ports.clock.now(), Some(error.clone())));
            if record.attempts.len() >= retry.attempts as usize {
                return Ok(Flow::Fail(error));
            }
            record.error = Some(error);
            record.child_run_id = None;
            self.record(record.clone());
            if let Some(stop) = self.checkpoint().await? {
                return Ok(stop);
            }
        }
    }

    /// Stores `record`, replacing an earlier one of the same step and iteration.
    fn record(&self, record: StepRecord) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let key = (record.id.clone(), record.iteration.clone());
        records.changes += 1;
        let change = records.changes;
        match records.index.get(&key) {
            Some(&at) => {
                records.list[at] = record;
                records.changed[at] = change;
            }
            None => {
                let at = records.list.len();
                records.list.push(record);
                records.changed.push(change);
                records.index.insert(key, at);
            }
        }
    }

    /// A copy of the records.
    fn snapshot(&self) -> (Vec<StepRecord>, u64) {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        (records.list.clone(), records.changes)
    }

    /// The records changed after change `since`, and the latest change.
    fn changed_since(&self, since: u64) -> (Vec<StepRecord>, u64) {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let changed = records
            .list
            .iter()
            .zip(&records.changed)
            .filter(|(_, at)| **at > since)
            .map(|(record, _)| record.clone())
            .collect();
        (changed, records.changes)
    }

    /// Writes the records and renews the lease; `Some` when the run must
    /// stop (cancelled, or the lease lost). A checkpoint that waited while
    /// another wrote what it holds writes nothing more.
    async fn checkpoint(&self) -> Result<Option<Flow>, StoreError> {
        let wanted = self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .changes;
        let mut written = self.writing.lock().await;
        if *written >= wanted {
            return Ok(None);
        }
        // Only what changed since the last write: a long loop's checkpoints
        // stay small.
        let (records, changes) = self.changed_since(*written);
        *written = changes;
        let answer = self
            .ports
            .journal
            .checkpoint(self.execution.run_id, self.execution.owner, &records)
            .await?;
        Ok(match answer {
            None => Some(Flow::Lost),
            Some(true) => Some(Flow::Cancelled),
            Some(false) => None,
        })
    }

    /// What one attempt of a step does.
    async fn action(
        &self,
        step: &Step,
        scope: &mut Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        let ctx: &Scope<'_> = scope;
        let user = self.execution.user;
        let data = &self.ports.data;
        let flow = match &step.action {
            Action::Transform(t) => Flow::Next(render(&t.output, ctx)),
            Action::Finish(f) => Flow::Finish(render(&f.result, ctx)),
            Action::Fail(f) => Flow::Fail(RunError::new(
                f.code.clone(),
                match render(&f.message, ctx) {
                    Value::String(s) => s,
                    Value::Null => "The workflow failed".to_owned(),
                    other => other.to_string(),
                },
            )),
            Action::Condition(c) => match condition::holds(&c.test, ctx, self.ports.clock.now()) {
                Ok(holds) => Flow::Next(Value::Bool(holds)),
                Err(e) => Flow::Fail(RunError::new(STEP_INVALID, e.to_string())),
            },
            Action::Delay(d) => {
                let ms = match render(&d.ms, ctx).as_u64() {
                    Some(ms) if ms <= DELAY_MAX_MS => ms,
                    _ => {
                        return Ok(Flow::Fail(RunError::new(
                            STEP_INVALID,
                            format!("{}.ms must be 0 to {DELAY_MAX_MS} milliseconds", step.id),
                        )));
                    }
                };
                // A delay resumed after a restart waits only what is left.
                let since = if record.attempts.is_empty() {
                    record.started_at
                } else {
                    self.ports.clock.now()
                };
                self.record(StepRecord {
                    started_at: since,
                    ..record.clone()
                });
                if let Some(stop) = self.checkpoint().await? {
                    return Ok(stop);
                }
                let elapsed = (self.ports.clock.now() - since).num_milliseconds().max(0) as u64;
                let remaining = Duration::from_millis(ms.saturating_sub(elapsed));
                self.effect(async move {
                    tokio::time::sleep(remaining).await;
                    Flow::Next(json!({ "waitedMs": ms }))
                })
                .await?
            }
            Action::Query(q) => {
                let filter = q.filter.as_ref().map(|f| render(f, ctx));
                let sort = q.sort.as_ref().map(|s| text(&render(s, ctx)));
                let limit = q.limit.as_ref().map(|l| text(&render(l, ctx)));
                self.effect(async {
                    flow_of(
                        data.query(user, &q.resource, filter.as_ref(), sort, limit)
                            .await,
                    )
                })
                .await?
            }
            Action::Insert(i) => {
                let body = render(&i.data, ctx);
                self.effect(async { flow_of(data.insert(user, &i.resource, &body).await) })
                    .await?
            }
            Action::Update(u) => {
                let key = text(&render(&u.key, ctx));
                let body = render(&u.data, ctx);
                self.effect(async { flow_of(data.update(user, &u.resource, &key, &body).await) })
                    .await?
            }
            Action::Delete(d) => {
                let key = text(&render(&d.key, ctx));
                self.effect(async { flow_of(data.delete(user, &d.resource, &key).await) })
                    .await?
            }
            Action::Http(h) => {
                let headers = match h.headers.as_ref().map(|v| render(v, ctx)) {
                    Some(Value::Object(map)) => {
                        map.into_iter().map(|(k, v)| (k, text(&v))).collect()
                    }
                    _ => Vec::new(),
                };
                let request = OutgoingRequest {
                    method: h.method.clone(),
                    url: text(&render(&Value::String(h.url.clone()), ctx)),
                    headers,
                    body: h.body.as_ref().map(|b| render(b, ctx)),
                    timeout: Duration::from_millis(h.timeout_ms.unwrap_or(HTTP_TIMEOUT_DEFAULT_MS)),
                    signing_secret: h.signing_secret.clone(),
                    allow_private: self.execution.allow_private,
                };
                let outbound = &self.ports.outbound;
                self.effect(async { flow_of(outbound.send(request).await) })
                    .await?
            }
            Action::ForEach(f) => self.for_each(f, ctx).await?,
            Action::Call(c) => self.call(c, ctx, record).await?,
        };
        Ok(flow)
    }

    /// A loop: each item's iteration in its own scope, up to `concurrency`
    /// at once; the result is each iteration's last result, in item order.
    async fn for_each(&self, each: &ForEach, scope: &Scope<'_>) -> Result<Flow, StoreError> {
        let items = match render(&each.items, scope) {
            Value::Array(items) if items.len() <= FOR_EACH_ITEMS_MAX => items,
            Value::Array(items) => {
                return Ok(Flow::Fail(RunError::new(
                    INVALID_PAYLOAD,
                    format!(
                        "forEach got {} items; at most {FOR_EACH_ITEMS_MAX} are allowed",
                        items.len()
                    ),
                )));
            }
            _ => {
                return Ok(Flow::Fail(RunError::new(
                    INVALID_PAYLOAD,
                    "forEach items must give an array",
                )));
            }
        };
        let count = items.len();
        let halt = AtomicBool::new(false);
        let halt = &halt;
        let iterations = items.into_iter().enumerate().map(|(index, item)| {
            let mut iteration = scope.iteration.clone();
            iteration.push(index);
            let mut vars = Map::new();
            vars.insert("item".into(), item);
            vars.insert("index".into(), index.into());
            vars.insert("steps".into(), Value::Object(Map::new()));
            async move {
                // A loop of pure steps never waits: let other tasks in.
                tokio::task::yield_now().await;
                let mut inner = Scope {
                    parent: Some(scope),
                    vars: Value::Object(vars),
                    iteration,
                    halt: Some(halt),
                };
                self.list(&each.steps, &mut inner).await
            }
        });
        let mut running =
            futures_util::stream::iter(iterations).buffered(each.concurrency as usize);
        let mut results = Vec::with_capacity(count);
        let mut ended = None;
        // An iteration that ends the loop halts the others at their next
        // step; those under way finish the step they are in.
        while let Some(flow) = running.next().await {
            match (flow?, &ended) {
                (Flow::Next(result), None) => results.push(result),
                (Flow::Next(_), Some(_)) => {}
                (other, None) => {
                    halt.store(true, Ordering::Relaxed);
                    ended = Some(other);
                }
                (_, Some(_)) => {}
            }
        }
        if let Some(ended) = ended {
            return Ok(ended);
        }
        Ok(Flow::Next(Value::Array(results)))
    }

    /// A child run of another published workflow, executed here (or, after
    /// a restart, followed where it runs); its outcome is the result, and a
    /// child that failed fails the step with its error.
    async fn call(
        &self,
        call: &Call,
        scope: &Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        let execution = self.execution;
        let outcome = match record.child_run_id {
            Some(child) => self.follow(child).await?,
            None => {
                let input = render(&call.input, scope);
                let (records, _) = self.snapshot();
                let stored = self.ports.journal.stored(&input, &records);
                let request = ChildRequest {
                    parent: execution.run_id,
                    chain: &execution.chain,
                    slug: &call.workflow,
                    input: &stored,
                    run_as: execution.user.user_id,
                };
                let child = match execution.children.start(request).await? {
                    Ok(child) => child,
                    Err(refused) => return Ok(Flow::Fail(refused)),
                };
                record.child_run_id = Some(child.run_id);
                self.record(record.clone());
                if let Some(stop) = self.checkpoint().await? {
                    return Ok(stop);
                }
                let run = Execution {
                    run_id: child.run_id,
                    owner: execution.owner,
                    definition: child.definition,
                    context: context(input, child.user),
                    user: RunUser {
                        run_id: child.run_id,
                        user_id: execution.user.user_id,
                    },
                    allow_private: execution.allow_private,
                    recorded: Vec::new(),
                    cancel: execution.cancel.clone(),
                    chain: child.chain,
                    children: execution.children.clone(),
                    budget: execution.budget.clone(),
                };
                let ports = Ports {
                    journal: self.ports.journal.clone().child(&records),
                    ..self.ports.clone()
                };
                let mut inline: Boxed<'_, Option<Outcome>> = Box::pin(execute(&ports, run));
                match self.watched(&mut inline).await? {
                    // The child ends CANCELLED at its next boundary.
                    Err(Flow::Cancelled) => {
                        execution.cancel.send_replace(true);
                        inline.await?;
                        return Ok(Flow::Cancelled);
                    }
                    Err(stop) => Err(stop),
                    Ok(done) => match done? {
                        Some(outcome) => Ok(outcome),
                        // Another instance took the child over.
                        None => self.follow(child.run_id).await?,
                    },
                }
            }
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(stop) => return Ok(stop),
        };
        Ok(match outcome.status {
            RunStatus::Failed => Flow::Fail(outcome.error.unwrap_or_else(|| {
                RunError::new(crate::run::INTERRUPTED, "The called workflow failed")
            })),
            RunStatus::Cancelled => Flow::Cancelled,
            _ => Flow::Next(json!({
                "status": outcome.status.as_str(),
                "result": outcome.result,
                "error": outcome.error,
            })),
        })
    }

    /// Reads a child run's outcome until it ends.
    async fn follow(&self, child: Uuid) -> Result<Result<Outcome, Flow>, StoreError> {
        let children = &self.execution.children;
        match self
            .watched(async {
                loop {
                    match children.outcome(child).await? {
                        Some(outcome) if outcome.status != RunStatus::Running => {
                            return Ok::<_, StoreError>(outcome);
                        }
                        None => {
                            return Ok(Outcome {
                                id: child,
                                status: RunStatus::Failed,
                                result: Value::Null,
                                error: Some(RunError::new(
                                    crate::run::INTERRUPTED,
                                    "The called workflow's run is gone",
                                )),
                            });
                        }
                        Some(_) => tokio::time::sleep(FOLLOW_CHILD_EVERY).await,
                    }
                }
            })
            .await?
        {
            Err(stop) => Ok(Err(stop)),
            Ok(read) => Ok(Ok(read?)),
        }
    }

    /// A step's effect, under the lease; a stop becomes the step's flow.
    async fn effect(&self, work: impl Future<Output = Flow>) -> Result<Flow, StoreError> {
        Ok(self.watched(work).await?.unwrap_or_else(|stop| stop))
    }

    /// Runs `work` while renewing the lease, and stops at once when the run
    /// is cancelled in this process: `Err` holds the flow that stops it.
    async fn watched<T>(
        &self,
        work: impl Future<Output = T>,
    ) -> Result<Result<T, Flow>, StoreError> {
        tokio::pin!(work);
        let execution = self.execution;
        let mut cancel = execution.cancel.subscribe();
        if *cancel.borrow() {
            return Ok(Err(Flow::Cancelled));
        }
        loop {
            tokio::select! {
                done = &mut work => return Ok(Ok(done)),
                Ok(()) = cancel.changed() => {
                    if *cancel.borrow() {
                        return Ok(Err(Flow::Cancelled));
                    }
                }
                () = tokio::time::sleep(self.ports.renew_every) => {
                    match self.ports.journal.renew(execution.run_id, execution.owner).await? {
                        None => return Ok(Err(Flow::Lost)),
                        Some(true) => return Ok(Err(Flow::Cancelled)),
                        Some(false) => {}
                    }
                }
            }
        }
    }
}

/// The wait after `failed` attempts: `backoffMs * factor^(failed-1)`, at
/// most an hour.
fn retry_wait(retry: &Retry, failed: usize) -> u64 {
    let exponent = i32::try_from(failed.saturating_sub(1)).unwrap_or(i32::MAX);
    let wait = retry.backoff_ms as f64 * retry.factor.powi(exponent);
    if wait.is_finite() {
        (wait as u64).min(RETRY_WAIT_MAX_MS)
    } else {
        RETRY_WAIT_MAX_MS
    }
}

fn attempt(
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    error: Option<RunError>,
) -> Attempt {
    Attempt {
        started_at,
        finished_at,
        error,
    }
}

/// With `retry`, an http answer of 5xx or 429 is a failed attempt.
fn failed_answer(step: &Step, result: &Value) -> Option<RunError> {
    if !matches!(step.action, Action::Http(_)) {
        return None;
    }
    let status = result.get("status").and_then(Value::as_u64)?;
    (status >= 500 || status == 429).then(|| {
        RunError::new(
            HTTP_REQUEST_FAILED,
            format!("The request was answered with status {status}"),
        )
    })
}

fn flow_of(answer: Result<Value, RunError>) -> Flow {
    match answer {
        Ok(value) => Flow::Next(value),
        Err(error) => Flow::Fail(error),
    }
}

/// A value as text: strings as they are, null empty, others as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use kernel::SystemClock;

    use super::*;
    use crate::model::Definition;

    /// Records what the executor writes.
    #[derive(Default)]
    struct Journal {
        checkpoints: Mutex<Vec<Vec<StepRecord>>>,
        finished: Mutex<Option<Outcome>>,
    }

    #[async_trait]
    impl RunJournal for Journal {
        async fn checkpoint(
            &self,
            _: Uuid,
            _: Uuid,
            steps: &[StepRecord],
        ) -> Result<Option<bool>, StoreError> {
            self.checkpoints.lock().unwrap().push(steps.to_vec());
            Ok(Some(false))
        }
        async fn renew(&self, _: Uuid, _: Uuid) -> Result<Option<bool>, StoreError> {
            Ok(Some(false))
        }
        fn child(self: Arc<Self>, _: &[StepRecord]) -> Arc<dyn RunJournal> {
            self
        }
        async fn finish(
            &self,
            _: Uuid,
            outcome: &Outcome,
            _: &[StepRecord],
        ) -> Result<(), StoreError> {
            *self.finished.lock().unwrap() = Some(outcome.clone());
            Ok(())
        }
    }

    /// Data steps that count their calls and answer a fixed row.
    #[derive(Default)]
    struct Rows(Mutex<usize>);

    #[async_trait]
    impl StepData for Rows {
        async fn query(
            &self,
            _: RunUser,
            _: &str,
            _: Option<&Value>,
            _: Option<String>,
            _: Option<String>,
        ) -> Result<Value, RunError> {
            *self.0.lock().unwrap() += 1;
            Ok(json!([{ "id": 1 }]))
        }
        async fn insert(&self, _: RunUser, _: &str, data: &Value) -> Result<Value, RunError> {
            *self.0.lock().unwrap() += 1;
            Ok(data.clone())
        }
        async fn update(&self, _: RunUser, _: &str, _: &str, _: &Value) -> Result<Value, RunError> {
            Err(RunError::new("PERMISSION_DENIED", "no"))
        }
        async fn delete(&self, _: RunUser, _: &str, _: &str) -> Result<Value, RunError> {
            Ok(json!({ "deleted": true }))
        }
    }

    struct NoHttp;

    /// Calls that find no workflow.
    struct NoChildren;

    #[async_trait]
    impl ChildRuns for NoChildren {
        async fn start(
            &self,
            _: ChildRequest<'_>,
        ) -> Result<Result<ChildRun, RunError>, StoreError> {
            Ok(Err(RunError::new("WORKFLOW_NOT_FOUND", "none")))
        }
        async fn outcome(&self, _: Uuid) -> Result<Option<Outcome>, StoreError> {
            Ok(None)
        }
    }

    #[async_trait]
    impl Outbound for NoHttp {
        async fn send(&self, _: OutgoingRequest) -> Result<Value, RunError> {
            Err(RunError::new("HTTP_TARGET_FORBIDDEN", "no"))
        }
    }

    fn ports(journal: Arc<Journal>, rows: Arc<Rows>) -> Ports {
        Ports {
            data: rows,
            outbound: Arc::new(NoHttp),
            journal,
            clock: Arc::new(SystemClock),
            renew_every: Duration::from_secs(10),
        }
    }

    fn execution(steps: Value, recorded: Vec<StepRecord>) -> Execution {
        let trigger = json!({ "type": "webhook", "access": "authenticated" });
        Execution {
            run_id: Uuid::nil(),
            owner: Uuid::nil(),
            definition: Arc::new(Definition::parse(&trigger, &steps, 30_000).unwrap()),
            context: context(json!({ "body": { "n": 3 } }), json!({ "id": "u" })),
            user: RunUser {
                run_id: Uuid::nil(),
                user_id: Uuid::nil(),
            },
            allow_private: false,
            recorded,
            cancel: Arc::new(watch::channel(false).0),
            chain: vec![Uuid::nil()],
            children: Arc::new(NoChildren),
            budget: step_budget(),
        }
    }

    #[tokio::test]
    async fn runs_steps_in_order_and_checkpoints_only_effects() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let steps = json!([
            { "id": "t", "type": "transform", "output": { "twice": ["{{start.data.body.n}}", "{{start.data.body.n}}"] } },
            { "id": "c", "type": "condition", "if": { "start.data.body.n": { "gt": 2 } },
              "then": [{ "id": "q", "type": "query", "resource": "public.x" }],
              "else": [{ "id": "never", "type": "fail", "code": "NO" }] },
            { "id": "f", "type": "finish", "result": { "t": "{{steps.t.result}}", "rows": "{{steps.q.result}}" } },
            { "id": "after", "type": "fail", "code": "UNREACHED" }
        ]);
        let outcome = execute(
            &ports(journal.clone(), rows.clone()),
            execution(steps, vec![]),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(outcome.status, RunStatus::Succeeded);
        assert_eq!(
            outcome.result,
            json!({ "t": { "twice": [3, 3] }, "rows": [{ "id": 1 }] })
        );
        assert_eq!(
            journal.checkpoints.lock().unwrap().len(),
            1,
            "only the query checkpoints"
        );
        assert_eq!(journal.finished.lock().unwrap().as_ref(), Some(&outcome));
    }

    #[tokio::test]
    async fn a_failing_step_fails_the_run_and_no_finish_means_null() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let failed = execute(&ports(journal.clone(), rows.clone()),
            execution(json!([{ "id": "u", "type": "update", "resource": "public.x", "key": 1, "data": {} }]), vec![]))
            .await.unwrap().unwrap();
        assert_eq!(failed.status, RunStatus::Failed);
        assert_eq!(failed.error.unwrap().code, "PERMISSION_DENIED");
        let empty = execute(&ports(journal, rows), execution(json!([]), vec![]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (empty.status, empty.result),
            (RunStatus::Succeeded, Value::Null)
        );
    }

    #[tokio::test]
    async fn a_resumed_run_keeps_finished_effects_and_finishes_its_delay() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let steps = json!([
            { "id": "add", "type": "insert", "resource": "public.x", "data": { "n": 1 } },
            { "id": "wait", "type": "delay", "ms": 200 },
            { "id": "f", "type": "finish", "result": "{{steps.add.result}}" }
        ]);
        let now = Utc::now();
        let recorded = vec![
            StepRecord {
                id: "add".into(),
                kind: "insert".into(),
                status: RunStatus::Succeeded,
                result: json!({ "n": "first" }),
                error: None,
                started_at: now,
                finished_at: Some(now),
                iteration: Vec::new(),
                attempts: Vec::new(),
                child_run_id: None,
            },
            StepRecord {
                id: "wait".into(),
                kind: "delay".into(),
                status: RunStatus::Running,
                result: Value::Null,
                error: None,
                started_at: now - chrono::Duration::milliseconds(150),
                finished_at: None,
                iteration: Vec::new(),
                attempts: Vec::new(),
                child_run_id: None,
            },
        ];
        let began = std::time::Instant::now();
        let outcome = execute(&ports(journal, rows.clone()), execution(steps, recorded))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            outcome.result,
            json!({ "n": "first" }),
            "the insert is not repeated"
        );
        assert_eq!(*rows.0.lock().unwrap(), 0);
        assert!(
            began.elapsed() < Duration::from_millis(190),
            "only the rest of the delay is waited"
        );
    }

    #[tokio::test]
    async fn cancellation_stops_a_delay_at_once() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let run = execution(
            json!([{ "id": "wait", "type": "delay", "ms": 60000 }, { "id": "f", "type": "finish", "result": 1 }]),
            vec![],
        );
        let cancel = run.cancel.clone();
        let ports = ports(journal, rows);
        let task = tokio::spawn(async move { execute(&ports, run).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.send_replace(true);
        let outcome = tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, RunStatus::Cancelled);
    }

    #[tokio::test]
    async fn a_handled_failure_is_not_made_again_when_a_run_resumes() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let steps = json!([
            { "id": "u", "type": "update", "resource": "public.x", "key": 1, "data": {}, "onError": "continue" },
            { "id": "f", "type": "finish", "result": "{{steps.u.error.code}}" }
        ]);
        let now = Utc::now();
        let recorded = vec![StepRecord {
            id: "u".into(),
            kind: "update".into(),
            status: RunStatus::Failed,
            result: Value::Null,
            error: Some(RunError::new("EARLIER", "recorded")),
            started_at: now,
            finished_at: Some(now),
            iteration: Vec::new(),
            attempts: Vec::new(),
            child_run_id: None,
        }];
        let outcome = execute(&ports(journal, rows), execution(steps, recorded))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            outcome.result,
            json!("EARLIER"),
            "the recorded failure stands"
        );
    }

    #[tokio::test]
    async fn a_run_takes_at_most_its_step_budget() {
        let (journal, rows) = (Arc::new(Journal::default()), Arc::new(Rows::default()));
        let inner: Vec<usize> = (0..20).collect();
        let outer: Vec<usize> = (0..1000).collect();
        let steps = json!([
            { "id": "outer", "type": "forEach", "items": outer, "concurrency": 10, "steps": [
                { "id": "inner", "type": "forEach", "items": inner, "steps": [
                    { "id": "t", "type": "transform", "output": "{{item}}" }] }] }
        ]);
        let outcome = execute(&ports(journal, rows), execution(steps, vec![]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, RunStatus::Failed);
        assert_eq!(outcome.error.unwrap().code, "INVALID_PAYLOAD");
    }
}
