//! The executor against in-memory ports.

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
    async fn finish(&self, _: Uuid, outcome: &Outcome, _: &[StepRecord]) -> Result<(), StoreError> {
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
    async fn start(&self, _: ChildRequest<'_>) -> Result<Result<ChildRun, RunError>, StoreError> {
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

/// The sandbox at a size of its own.
struct FixedScripts(scripts::ScriptPool);

#[async_trait]
impl ScriptRunner for FixedScripts {
    async fn run(&self, code: Arc<str>, input: Value, limits: scripts::Limits) -> scripts::Outcome {
        self.0.run(2, code, input, limits).await
    }
}

fn ports(journal: Arc<Journal>, rows: Arc<Rows>) -> Ports {
    Ports {
        data: rows,
        outbound: Arc::new(NoHttp),
        scripts: Arc::new(FixedScripts(scripts::ScriptPool::new(2))),
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
    let failed = execute(
        &ports(journal.clone(), rows.clone()),
        execution(
            json!([{ "id": "u", "type": "update", "resource": "public.x", "key": 1, "data": {} }]),
            vec![],
        ),
    )
    .await
    .unwrap()
    .unwrap();
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
            logs: Vec::new(),
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
            logs: Vec::new(),
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
        logs: Vec::new(),
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
