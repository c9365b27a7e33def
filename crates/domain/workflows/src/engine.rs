//! The step executor: walks a definition's steps in order against the run's
//! context, records each step, checkpoints after every step with an effect
//! outside the run (data, http, delay), renews the run's lease while a step
//! takes long, and stops at the next step boundary once cancelled. What it
//! reaches outside the run goes through the traits of `ports`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kernel::StoreError;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use uuid::Uuid;

use crate::condition;
use crate::model::{Action, DELAY_MAX_MS, Definition, HTTP_TIMEOUT_DEFAULT_MS, Step};
use crate::run::{Outcome, RunError, RunStatus, STEP_INVALID, StepRecord};
use crate::template::render;

pub use crate::ports::{Outbound, OutgoingRequest, Ports, RunJournal, RunUser, StepData};

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
}

/// How a step ended.
enum Flow {
    Next(Value),
    Finish(Value),
    Fail(RunError),
    Cancelled,
}

/// The context of a run: `start.data`, `steps` (empty) and `user`.
pub fn context(start_data: Value, user: Value) -> Value {
    json!({ "start": { "data": start_data }, "steps": {}, "user": user })
}

/// Runs `execution` to its end (or until its lease is lost: then `None`).
pub async fn execute(
    ports: &Ports,
    mut execution: Execution,
) -> Result<Option<Outcome>, StoreError> {
    let definition = execution.definition.clone();
    let earlier: HashMap<String, StepRecord> = execution
        .recorded
        .drain(..)
        .map(|record| (record.id.clone(), record))
        .collect();
    let mut records: Vec<StepRecord> = Vec::new();
    let mut frames: Vec<(&[Step], usize)> = vec![(&definition.steps, 0)];
    let mut ended: Option<(RunStatus, Value, Option<RunError>)> = None;
    while let Some((list, index)) = frames.last_mut() {
        let Some(step) = list.get(*index) else {
            frames.pop();
            continue;
        };
        *index += 1;
        if *execution.cancel.borrow() {
            ended = Some((RunStatus::Cancelled, Value::Null, None));
            break;
        }
        let started_at = ports.clock.now();
        let reused = earlier
            .get(&step.id)
            .filter(|r| r.status == RunStatus::Succeeded && !step.action.is_pure())
            .map(|r| r.result.clone());
        let flow = match reused {
            Some(result) => Some(Flow::Next(result)),
            None => {
                let delay_started = earlier
                    .get(&step.id)
                    .filter(|r| r.status == RunStatus::Running)
                    .map(|r| r.started_at);
                run_step(
                    ports,
                    &mut execution,
                    &mut records,
                    step,
                    started_at,
                    delay_started,
                )
                .await?
            }
        };
        let Some(flow) = flow else {
            return Ok(None);
        };
        let finished_at = ports.clock.now();
        let (status, result, error) = match &flow {
            Flow::Next(v) | Flow::Finish(v) => (RunStatus::Succeeded, v.clone(), None),
            Flow::Fail(e) => (RunStatus::Failed, Value::Null, Some(e.clone())),
            Flow::Cancelled => {
                ended = Some((RunStatus::Cancelled, Value::Null, None));
                break;
            }
        };
        records.retain(|r| r.id != step.id);
        records.push(StepRecord {
            id: step.id.clone(),
            kind: step.action.type_name().to_owned(),
            status,
            result: result.clone(),
            error: error.clone(),
            started_at,
            finished_at: Some(finished_at),
        });
        if let Some(steps) = execution
            .context
            .get_mut("steps")
            .and_then(Value::as_object_mut)
        {
            steps.insert(step.id.clone(), json!({ "result": result }));
        }
        match flow {
            Flow::Finish(v) => {
                ended = Some((RunStatus::Succeeded, v, None));
                break;
            }
            Flow::Fail(e) => {
                ended = Some((RunStatus::Failed, Value::Null, Some(e)));
                break;
            }
            _ => {}
        }
        if let Action::Condition(c) = &step.action {
            let branch = if result == Value::Bool(true) {
                &c.then
            } else {
                &c.otherwise
            };
            frames.push((branch, 0));
        } else if !step.action.is_pure() {
            match ports
                .journal
                .checkpoint(execution.run_id, execution.owner, &records)
                .await?
            {
                None => return Ok(None),
                Some(true) => {
                    ended = Some((RunStatus::Cancelled, Value::Null, None));
                    break;
                }
                Some(false) => {}
            }
        }
    }
    let (status, result, error) = ended.unwrap_or((RunStatus::Succeeded, Value::Null, None));
    // A delay cut short by the cancellation ends with the run.
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

/// Runs one step; `None` when the lease was lost while it ran.
async fn run_step(
    ports: &Ports,
    execution: &mut Execution,
    records: &mut Vec<StepRecord>,
    step: &Step,
    started_at: DateTime<Utc>,
    delay_started: Option<DateTime<Utc>>,
) -> Result<Option<Flow>, StoreError> {
    let ctx = &execution.context;
    let user = execution.user;
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
        Action::Condition(c) => match condition::holds(&c.test, ctx, ports.clock.now()) {
            Ok(holds) => Flow::Next(Value::Bool(holds)),
            Err(e) => Flow::Fail(RunError::new(STEP_INVALID, e.to_string())),
        },
        Action::Delay(d) => {
            let ms = match render(&d.ms, ctx).as_u64() {
                Some(ms) if ms <= DELAY_MAX_MS => ms,
                _ => {
                    return Ok(Some(Flow::Fail(RunError::new(
                        STEP_INVALID,
                        format!("{}.ms must be 0 to {DELAY_MAX_MS} milliseconds", step.id),
                    ))));
                }
            };
            let since = delay_started.unwrap_or(started_at);
            records.retain(|r| r.id != step.id);
            records.push(StepRecord {
                id: step.id.clone(),
                kind: "delay".into(),
                status: RunStatus::Running,
                result: Value::Null,
                error: None,
                started_at: since,
                finished_at: None,
            });
            match ports
                .journal
                .checkpoint(execution.run_id, execution.owner, records)
                .await?
            {
                None => return Ok(None),
                Some(true) => return Ok(Some(Flow::Cancelled)),
                Some(false) => {}
            }
            let elapsed = (ports.clock.now() - since).num_milliseconds().max(0) as u64;
            let remaining = Duration::from_millis(ms.saturating_sub(elapsed));
            return watched(ports, execution, async move {
                tokio::time::sleep(remaining).await;
                Flow::Next(json!({ "waitedMs": ms }))
            })
            .await;
        }
        Action::Query(q) => {
            let filter = q.filter.as_ref().map(|f| render(f, ctx));
            let sort = q.sort.as_ref().map(|s| text(&render(s, ctx)));
            let limit = q.limit.as_ref().map(|l| text(&render(l, ctx)));
            let data = ports.data.clone();
            let resource = q.resource.clone();
            return watched(ports, execution, async move {
                flow_of(
                    data.query(user, &resource, filter.as_ref(), sort, limit)
                        .await,
                )
            })
            .await;
        }
        Action::Insert(i) => {
            let body = render(&i.data, ctx);
            let (data, resource) = (ports.data.clone(), i.resource.clone());
            return watched(ports, execution, async move {
                flow_of(data.insert(user, &resource, &body).await)
            })
            .await;
        }
        Action::Update(u) => {
            let key = text(&render(&u.key, ctx));
            let body = render(&u.data, ctx);
            let (data, resource) = (ports.data.clone(), u.resource.clone());
            return watched(ports, execution, async move {
                flow_of(data.update(user, &resource, &key, &body).await)
            })
            .await;
        }
        Action::Delete(d) => {
            let key = text(&render(&d.key, ctx));
            let (data, resource) = (ports.data.clone(), d.resource.clone());
            return watched(ports, execution, async move {
                flow_of(data.delete(user, &resource, &key).await)
            })
            .await;
        }
        Action::Http(h) => {
            let headers = match h.headers.as_ref().map(|v| render(v, ctx)) {
                Some(Value::Object(map)) => map.into_iter().map(|(k, v)| (k, text(&v))).collect(),
                _ => Vec::new(),
            };
            let request = OutgoingRequest {
                method: h.method.clone(),
                url: text(&render(&Value::String(h.url.clone()), ctx)),
                headers,
                body: h.body.as_ref().map(|b| render(b, ctx)),
                timeout: Duration::from_millis(h.timeout_ms.unwrap_or(HTTP_TIMEOUT_DEFAULT_MS)),
                signing_secret: h.signing_secret.clone(),
                allow_private: execution.allow_private,
            };
            let outbound = ports.outbound.clone();
            return watched(ports, execution, async move {
                flow_of(outbound.send(request).await)
            })
            .await;
        }
    };
    Ok(Some(flow))
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

/// Runs a step's work while renewing the lease, and stops at once when the
/// run is cancelled in this process. `None`: the lease was lost.
async fn watched(
    ports: &Ports,
    execution: &Execution,
    work: impl Future<Output = Flow>,
) -> Result<Option<Flow>, StoreError> {
    tokio::pin!(work);
    let mut cancel = execution.cancel.subscribe();
    if *cancel.borrow() {
        return Ok(Some(Flow::Cancelled));
    }
    loop {
        tokio::select! {
            flow = &mut work => return Ok(Some(flow)),
            Ok(()) = cancel.changed() => {
                if *cancel.borrow() {
                    return Ok(Some(Flow::Cancelled));
                }
            }
            () = tokio::time::sleep(ports.renew_every) => {
                match ports.journal.renew(execution.run_id, execution.owner).await? {
                    None => return Ok(None),
                    Some(true) => return Ok(Some(Flow::Cancelled)),
                    Some(false) => {}
                }
            }
        }
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
            },
            StepRecord {
                id: "wait".into(),
                kind: "delay".into(),
                status: RunStatus::Running,
                result: Value::Null,
                error: None,
                started_at: now - chrono::Duration::milliseconds(150),
                finished_at: None,
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
}
