//! The workflow service: definitions for the Admin API, webhook calls, the
//! result route, and the background work that resumes orphaned runs,
//! starts database-event runs and purges old runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use audit::AuditEvent;
use auth::{AuthService, SettingsService};
use chrono::{DateTime, Utc};
use kernel::{FieldError, new_id};
use permissions::{Plane, Principal};
use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, watch};
use uuid::Uuid;

use crate::engine::{self, Execution, Ports, RunJournal, RunUser};
use crate::error::WorkflowError;
use crate::model::{
    Definition, OnTimeout, ResponseMode, Trigger, WAIT_SECONDS_DEFAULT, WebhookAccess,
    WebhookMethod,
};
use crate::redact::{Redacting, Secrets};
use crate::run::{INTERRUPTED, Outcome, RunError, RunRecord, RunStatus, StepRecord};
use crate::store::{
    ClaimedRun, EventTarget, NewRun, NewWorkflow, ResultAsker, WebhookLookup, WebhookTarget,
    WorkflowChanges, WorkflowRecord, WorkflowStore,
};

/// Runs one instance executes at once; more wait for a slot.
const CONCURRENT_RUNS_MAX: usize = 1024;
/// A run resumed more often than this is failed as interrupted.
const ATTEMPTS_MAX: i32 = 3;
/// Runs or events claimed per pass of the background worker.
const CLAIM_BATCH: u64 = 32;
/// A webhook's body as `start.data.body`: none is null; otherwise a JSON
/// object or array, anything else 400 INVALID_WEBHOOK_PAYLOAD.
fn webhook_body(bytes: Option<&[u8]>) -> Result<Value, WorkflowError> {
    match bytes.map(serde_json::from_slice::<Value>) {
        None => Ok(Value::Null),
        Some(Ok(value @ (Value::Object(_) | Value::Array(_)))) => Ok(value),
        Some(_) => Err(WorkflowError::InvalidWebhookPayload),
    }
}

/// What a worker pass claims.
#[derive(Clone, Copy)]
enum Batch {
    /// Row events, each starting runs.
    Events,
    /// Runs whose lease expired.
    Orphans,
}

/// How often a sync webhook reads a run another instance took over.
const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// A webhook call as received.
#[derive(Debug, Clone)]
pub struct WebhookCall<'a> {
    /// The workflow's slug.
    pub slug: &'a str,
    /// GET or POST.
    pub method: WebhookMethod,
    /// The bearer credential, if sent.
    pub bearer: Option<&'a str>,
    /// Query parameters: each a string or a list of strings.
    pub query: Map<String, Value>,
    /// The raw POST body (None for GET).
    pub body: Option<&'a [u8]>,
    /// Header names (lower case) and values.
    pub headers: Map<String, Value>,
    /// The caller's address.
    pub ip: String,
}

/// How a webhook call is answered.
#[derive(Debug, Clone)]
pub enum WebhookAnswer {
    /// 202 `{ run }`.
    Started(Uuid),
    /// 200 with the outcome.
    Finished(Outcome),
}

/// Tunables of the run executor.
#[derive(Debug, Clone, Copy)]
pub struct RunnerOptions {
    /// How long a run's lease lasts without renewal.
    pub lease: Duration,
    /// How often the background worker looks for work.
    pub poll: Duration,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(500),
        }
    }
}

/// Workflows.
#[derive(Clone)]
pub struct WorkflowService {
    store: Arc<dyn WorkflowStore>,
    auth: AuthService,
    settings: SettingsService,
    ports: Ports,
    owner: Uuid,
    options: RunnerOptions,
    slots: Arc<Semaphore>,
    published: Arc<PublishedDefinitions>,
    /// Set by [`WorkflowService::drain`]: the worker claims nothing more.
    stopping: Arc<AtomicBool>,
}

/// What a create or update sends.
#[derive(Debug, Clone, Default)]
pub struct WorkflowInput {
    /// The slug.
    pub slug: Option<String>,
    /// The name.
    pub name: Option<String>,
    /// Enabled.
    pub enabled: Option<bool>,
    /// The trigger.
    pub trigger: Option<Value>,
    /// The steps.
    pub steps: Option<Value>,
}

impl WorkflowService {
    /// A service over `store`, running steps through `ports`.
    pub fn new(
        store: Arc<dyn WorkflowStore>,
        auth: AuthService,
        settings: SettingsService,
        ports: Ports,
        options: RunnerOptions,
    ) -> Self {
        Self {
            store,
            auth,
            settings,
            ports,
            owner: new_id(),
            options,
            slots: Arc::new(Semaphore::new(CONCURRENT_RUNS_MAX)),
            published: Arc::default(),
            stopping: Arc::default(),
        }
    }

    /// Every workflow.
    pub async fn list(&self) -> Result<Vec<WorkflowRecord>, WorkflowError> {
        Ok(self.store.workflows().await?)
    }

    /// One workflow.
    pub async fn get(&self, id: Uuid) -> Result<WorkflowRecord, WorkflowError> {
        self.store
            .workflow(id)
            .await?
            .ok_or(WorkflowError::NotFound)
    }

    /// Parses and checks a definition against the store (users, resources).
    async fn checked(&self, trigger: &Value, steps: &Value) -> Result<Definition, WorkflowError> {
        let settings = self.settings.current().await?;
        let definition = Definition::parse(trigger, steps, settings.max_sync_wait_ms())?;
        match &definition.trigger {
            Trigger::Webhook(hook) => {
                if let Some(user) = hook.execute_as
                    && !self.store.user_exists(user).await?
                {
                    return Err(FieldError::new("trigger.executeAs", "no such active user").into());
                }
            }
            Trigger::DbEvent(event) => {
                if !self.store.resource_exists(event.resource_id).await? {
                    return Err(FieldError::new("trigger.resourceId", "no such resource").into());
                }
                if let Some(user) = event.execute_as
                    && !self.store.user_exists(user).await?
                {
                    return Err(FieldError::new("trigger.executeAs", "no such active user").into());
                }
            }
        }
        Ok(definition)
    }

    /// Creates a workflow (its draft; publish to run it).
    pub async fn create(
        &self,
        caller: &Principal,
        input: WorkflowInput,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let slug = slug(input.slug.as_deref().unwrap_or_default())?;
        let name = name(input.name.as_deref().unwrap_or(&slug))?;
        let definition = self
            .checked(
                input.trigger.as_ref().unwrap_or(&Value::Null),
                input.steps.as_ref().unwrap_or(&Value::Array(Vec::new())),
            )
            .await?;
        let id = new_id();
        let event = AuditEvent::new(caller.actor(), "workflow.create", Some(id.to_string()), ip)
            .with_details(json!({ "slug": slug }));
        Ok(self
            .store
            .create_workflow(
                NewWorkflow {
                    id,
                    slug,
                    name,
                    enabled: input.enabled.unwrap_or(true),
                    draft: definition.to_json(),
                },
                event,
            )
            .await?)
    }

    /// Changes a workflow's draft, name, slug or enabled flag.
    pub async fn update(
        &self,
        caller: &Principal,
        id: Uuid,
        input: WorkflowInput,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let current = self.get(id).await?;
        let draft = if input.trigger.is_some() || input.steps.is_some() {
            let trigger = input
                .trigger
                .unwrap_or_else(|| current.draft["trigger"].clone());
            let steps = input
                .steps
                .unwrap_or_else(|| current.draft["steps"].clone());
            Some(self.checked(&trigger, &steps).await?.to_json())
        } else {
            None
        };
        let changes = WorkflowChanges {
            slug: input.slug.as_deref().map(slug).transpose()?,
            name: input.name.as_deref().map(name).transpose()?,
            enabled: input.enabled,
            draft,
        };
        let event = AuditEvent::new(caller.actor(), "workflow.update", Some(id.to_string()), ip);
        self.store
            .update_workflow(id, changes, event)
            .await?
            .ok_or(WorkflowError::NotFound)
    }

    /// Deletes a workflow, its grants and its runs.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), WorkflowError> {
        let event = AuditEvent::new(caller.actor(), "workflow.delete", Some(id.to_string()), ip);
        if self.store.delete_workflow(id, event).await? {
            Ok(())
        } else {
            Err(WorkflowError::NotFound)
        }
    }

    /// Copies the draft to the published version, checked again (the wait
    /// limit or a user may have changed since it was saved).
    pub async fn publish(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let current = self.get(id).await?;
        let definition = self
            .checked(&current.draft["trigger"], &current.draft["steps"])
            .await?;
        let target = match &definition.trigger {
            Trigger::DbEvent(event) => Some(EventTarget {
                resource_id: event.resource_id,
                events: event.events.iter().map(|e| e.as_str().to_owned()).collect(),
            }),
            Trigger::Webhook(_) => None,
        };
        let event = AuditEvent::new(caller.actor(), "workflow.publish", Some(id.to_string()), ip);
        self.store
            .publish(id, definition.to_json(), target, event)
            .await?
            .ok_or(WorkflowError::NotFound)
    }

    /// Runs the draft synchronously in test mode with `{ query, body, meta }`
    /// (for a database-event workflow, `body` is the event), as Execute as or
    /// else the administrator testing it.
    pub async fn test(
        &self,
        caller: &Principal,
        id: Uuid,
        input: Value,
    ) -> Result<Outcome, WorkflowError> {
        let current = self.get(id).await?;
        let definition = Definition::from_stored(&current.draft)?;
        let Value::Object(mut input) = input else {
            return Err(FieldError::new("data", "must be an object { query, body, meta }").into());
        };
        let start_data = match &definition.trigger {
            Trigger::Webhook(_) => json!({
                "query": input.remove("query").unwrap_or_else(|| json!({})),
                "body": input.remove("body").unwrap_or(Value::Null),
                "meta": input.remove("meta").unwrap_or_else(|| json!({ "ip": null, "headers": {} })),
            }),
            // A database event's `start.data` ({ event, resource, old, new }) comes as the body.
            Trigger::DbEvent(_) => input.remove("body").unwrap_or_else(|| json!({})),
        };
        let run_as = match &definition.trigger {
            Trigger::Webhook(hook) => hook.execute_as.unwrap_or(caller.user_id),
            Trigger::DbEvent(event) => event.execute_as.unwrap_or(caller.user_id),
        };
        let settings = self.settings.current().await?;
        let (run, handle) = self
            .start(RunStart {
                workflow_id: current.id,
                test: true,
                definition: Arc::new(definition),
                stored: current.draft,
                start_data,
                run_as,
                caller_id: Some(caller.user_id),
                allow_private: settings.http_allow_private(),
            })
            .await?;
        let wait = Duration::from_millis(settings.max_sync_wait_ms());
        self.await_outcome(run, handle, wait, None).await
    }

    /// The published, enabled webhooks a role may call: the public ones,
    /// and those `granted` to it (every one for administrators).
    pub async fn webhooks(
        &self,
        admin: bool,
        granted: &[Uuid],
    ) -> Result<Vec<WebhookInfo>, WorkflowError> {
        let mut hooks = Vec::new();
        for record in self.store.workflows().await? {
            let Some(definition) = record
                .published
                .as_ref()
                .filter(|_| record.enabled)
                .and_then(|p| Definition::from_stored(p).ok())
            else {
                continue;
            };
            let Trigger::Webhook(hook) = definition.trigger else {
                continue;
            };
            let public = hook.access == WebhookAccess::Public;
            if public || admin || granted.contains(&record.id) {
                hooks.push(WebhookInfo {
                    slug: record.slug,
                    name: record.name,
                    post: hook.method == WebhookMethod::Post,
                    sync: hook.response == ResponseMode::Sync,
                    public,
                });
            }
        }
        Ok(hooks)
    }

    /// A workflow's runs, newest first.
    pub async fn runs(
        &self,
        id: Uuid,
        limit: u64,
        offset: u64,
    ) -> Result<Vec<RunRecord>, WorkflowError> {
        self.get(id).await?;
        Ok(self.store.runs(id, limit, offset).await?)
    }

    /// Answers a webhook call per the specification.
    pub async fn invoke(&self, call: WebhookCall<'_>) -> Result<WebhookAnswer, WorkflowError> {
        let method = match call.method {
            WebhookMethod::Post => "POST",
            WebhookMethod::Get => "GET",
        };
        let rate_key = format!("webhook:{}", call.ip);
        let target = self
            .store
            .webhook(WebhookLookup {
                slug: call.slug,
                method,
                rate_key: &rate_key,
            })
            .await?
            .ok_or(WorkflowError::WebhookNotFound)?;
        let definition = self.published.get(&target)?;
        let Trigger::Webhook(hook) = &definition.trigger else {
            return Err(WorkflowError::WebhookNotFound);
        };
        if hook.method != call.method {
            return Err(WorkflowError::WebhookNotFound);
        }
        let (run_as, caller_id) = match hook.access {
            WebhookAccess::Public => {
                if let Some(retry_after) = target.retry_after {
                    return Err(WorkflowError::RateLimited { retry_after });
                }
                (hook.execute_as.ok_or(WorkflowError::WebhookNotFound)?, None)
            }
            WebhookAccess::Authenticated => {
                let bearer = call.bearer.ok_or(auth::AuthError::AuthenticationRequired)?;
                let caller = self.auth.resolve(bearer).await?.principal;
                caller
                    .authorize(Plane::Api, false)
                    .map_err(|e| WorkflowError::Auth(auth::AuthError::Denied(e)))?;
                let granted = caller
                    .role_ids
                    .iter()
                    .any(|r| target.invoke_roles.contains(r));
                if !caller.admin && !granted {
                    return Err(WorkflowError::ActionDenied);
                }
                (
                    hook.execute_as.unwrap_or(caller.user_id),
                    Some(caller.user_id),
                )
            }
        };
        let settings = self.settings.current().await?;
        let body = webhook_body(call.body)?;
        let start_data = json!({
            "query": call.query,
            "body": body,
            "meta": { "ip": call.ip, "headers": call.headers },
        });
        let response = hook.response;
        let wait =
            Duration::from_secs(u64::from(hook.wait_seconds.unwrap_or(WAIT_SECONDS_DEFAULT)))
                .min(Duration::from_millis(settings.max_sync_wait_ms()));
        let on_timeout = hook.on_timeout.unwrap_or_default();
        let (run, handle) = self
            .start(RunStart {
                workflow_id: target.workflow_id,
                test: false,
                definition: definition.clone(),
                stored: target.definition,
                start_data,
                run_as,
                caller_id,
                allow_private: settings.http_allow_private(),
            })
            .await?;
        match response {
            // A pure run is stored when it ends, at once: answer once it is.
            ResponseMode::Async if run.stored_at_end => match handle.await {
                Ok(Some(_)) => Ok(WebhookAnswer::Started(run.id)),
                _ => Err(WorkflowError::Store(kernel::StoreError::Unavailable(
                    "the run could not be stored".into(),
                ))),
            },
            ResponseMode::Async => Ok(WebhookAnswer::Started(run.id)),
            ResponseMode::Sync => self
                .await_outcome(run, handle, wait, Some(on_timeout))
                .await
                .map(WebhookAnswer::Finished),
        }
    }

    /// `GET /api/workflows/runs/{id}/result`.
    pub async fn result(&self, bearer: &str, run: &str) -> Result<Outcome, WorkflowError> {
        let caller = self.auth.resolve(bearer).await?.principal;
        caller
            .authorize(Plane::Api, false)
            .map_err(|e| WorkflowError::Auth(auth::AuthError::Denied(e)))?;
        let run: Uuid = run.parse().map_err(|_| WorkflowError::RunNotFound)?;
        let asker = ResultAsker {
            user_id: caller.user_id,
            role_ids: &caller.role_ids,
            admin: caller.admin,
        };
        self.store
            .run_result(run, asker)
            .await?
            .ok_or(WorkflowError::RunNotFound)
    }

    /// Stores a new run and executes it in the background.
    async fn start(
        &self,
        start: RunStart,
    ) -> Result<(StartedRun, tokio::task::JoinHandle<Option<Outcome>>), WorkflowError> {
        let RunStart {
            workflow_id,
            test,
            definition,
            stored,
            start_data,
            run_as,
            caller_id,
            allow_private,
        } = start;
        let id = new_id();
        let secrets = Secrets::of(&start_data);
        let run = NewRun {
            id,
            workflow_id,
            test,
            definition: stored,
            input: secrets.redacted(&start_data),
            run_as,
            caller_id,
            owner: self.owner,
            lease: self.options.lease,
        };
        let stored_at_end = definition.is_pure();
        let journal: Arc<dyn RunJournal> = if stored_at_end {
            Arc::new(RecordAtEnd {
                store: self.store.clone(),
                run,
            })
        } else {
            self.store.start_run(run).await?;
            self.ports.journal.clone()
        };
        let journal = Redacting::wrap(journal, secrets);
        let cancel = Arc::new(watch::channel(false).0);
        let handle = self
            .spawn(Launch {
                run_id: id,
                definition,
                start_data,
                run_as,
                recorded: Vec::new(),
                cancel: cancel.clone(),
                journal,
                allow_private,
            })
            .await;
        Ok((
            StartedRun {
                id,
                cancel,
                stored_at_end,
            },
            handle,
        ))
    }

    /// Executes a stored run on this instance.
    async fn spawn(&self, launch: Launch) -> tokio::task::JoinHandle<Option<Outcome>> {
        let Launch {
            run_id,
            definition,
            start_data,
            run_as,
            recorded,
            cancel,
            journal,
            allow_private,
        } = launch;
        let permit = self.slots.clone().acquire_owned().await.ok();
        let service = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let user = if definition.reads_user() {
                match service.store.run_user(run_as).await {
                    Ok(Some(record)) => record.profile,
                    _ => Value::Null,
                }
            } else {
                json!({ "id": run_as })
            };
            let execution = Execution {
                run_id,
                owner: service.owner,
                definition,
                context: engine::context(start_data, user),
                user: RunUser {
                    run_id,
                    user_id: run_as,
                },
                allow_private,
                recorded,
                cancel,
            };
            let ports = Ports {
                journal,
                ..service.ports.clone()
            };
            match engine::execute(&ports, execution).await {
                Ok(outcome) => {
                    if let Some(ended) = &outcome {
                        metrics::counter!("tessera_workflow_runs_total", "status" => ended.status.as_str())
                            .increment(1);
                    }
                    outcome
                }
                Err(error) => {
                    tracing::error!(run = %run_id, ?error, "workflow run stopped on a store failure");
                    None
                }
            }
        })
    }

    /// Waits for a run; past `wait`, cancels it when asked and answers 504.
    /// When this instance loses the run's lease (it stalled and another
    /// instance took the run over), the answer is the run's stored outcome,
    /// followed until `wait` ends.
    async fn await_outcome(
        &self,
        run: StartedRun,
        mut handle: tokio::task::JoinHandle<Option<Outcome>>,
        wait: Duration,
        on_timeout: Option<OnTimeout>,
    ) -> Result<Outcome, WorkflowError> {
        let deadline = tokio::time::Instant::now() + wait;
        match tokio::time::timeout_at(deadline, &mut handle).await {
            Ok(Ok(Some(outcome))) => return Ok(outcome),
            Ok(Ok(None)) if !run.stored_at_end => {
                if let Some(outcome) = self.follow(run.id, deadline).await? {
                    return Ok(outcome);
                }
            }
            Ok(_) => return Err(WorkflowError::SyncTimeout { run: run.id }),
            Err(_) => {}
        }
        if on_timeout == Some(OnTimeout::Cancel) {
            run.cancel.send_replace(true);
            self.store.request_cancel(run.id).await?;
        }
        Err(WorkflowError::SyncTimeout { run: run.id })
    }

    /// Reads a run another instance executes until it ends or `deadline`
    /// passes (then `None`).
    async fn follow(
        &self,
        run: Uuid,
        deadline: tokio::time::Instant,
    ) -> Result<Option<Outcome>, WorkflowError> {
        loop {
            if let Some(outcome) = self.store.run_outcome(run).await?
                && outcome.status != RunStatus::Running
            {
                return Ok(Some(outcome));
            }
            if tokio::time::Instant::now() + FOLLOW_EVERY > deadline {
                return Ok(None);
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }

    /// Background work until the process stops or [`WorkflowService::drain`]
    /// begins: resumes runs whose lease
    /// expired (failing those resumed too often), starts runs for row
    /// events, and purges runs past `workflows.run_retention_days`.
    pub async fn work(self) {
        let mut tick: u64 = 0;
        while !self.stopping.load(Ordering::Relaxed) {
            let more = match self.pass(tick).await {
                Ok(more) => more,
                Err(error) => {
                    tracing::warn!(?error, "workflow worker pass failed");
                    false
                }
            };
            tick = tick.wrapping_add(1);
            // A full batch: more may wait, so the next pass follows at once
            // (starting runs waits for free slots, which bounds the pace).
            if !more {
                tokio::time::sleep(self.options.poll).await;
            }
        }
    }

    /// Stops taking work, waits up to `grace` for the runs this instance
    /// executes to end, then releases the leases of those still running so
    /// another instance resumes them at once (not when the lease expires);
    /// answers how many were released.
    pub async fn drain(&self, grace: Duration) -> Result<u64, WorkflowError> {
        self.stopping.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + grace;
        while self.slots.available_permits() < CONCURRENT_RUNS_MAX
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(self.store.release_leases(self.owner).await?)
    }

    /// One pass of the background work; answers whether a batch came back
    /// full (more events or orphans may be waiting).
    pub async fn pass(&self, tick: u64) -> Result<bool, WorkflowError> {
        let lease = self.options.lease;
        let settings = self.settings.current().await?;
        let mut more = false;
        for batch in [Batch::Events, Batch::Orphans] {
            let claimed = match batch {
                Batch::Events => self.store.claim_events(self.owner, lease, CLAIM_BATCH),
                Batch::Orphans => self.store.claim_orphans(self.owner, lease, CLAIM_BATCH),
            }
            .await?;
            more |= claimed.len() as u64 >= CLAIM_BATCH;
            for run in claimed {
                self.resume(run, settings.http_allow_private()).await;
            }
        }
        self.store.clear_ended_limits().await?;
        let passes_per_hour = (3600.0 / self.options.poll.as_secs_f64().max(0.001)) as u64;
        if tick.is_multiple_of(passes_per_hour.max(1)) {
            let days = settings.run_retention_days();
            let purged = self.store.purge_runs(days).await?;
            if purged > 0 {
                tracing::info!(purged, "purged old workflow runs");
            }
        }
        Ok(more)
    }

    /// Executes a claimed run from its last recorded step, or fails it as
    /// interrupted when it has been resumed too often or cannot be read.
    async fn resume(&self, claimed: ClaimedRun, allow_private: bool) {
        let refusal = match Definition::from_stored(&claimed.definition) {
            Ok(definition) if claimed.attempts <= ATTEMPTS_MAX => Ok(definition),
            Ok(_) => Err("The run was interrupted too often and was stopped"),
            Err(_) => Err("The run's definition can no longer be read"),
        };
        let definition = match refusal {
            Ok(definition) => definition,
            Err(message) => {
                let outcome = Outcome {
                    id: claimed.id,
                    status: RunStatus::Failed,
                    result: Value::Null,
                    error: Some(RunError::new(INTERRUPTED, message)),
                };
                if let Err(error) = self
                    .ports
                    .journal
                    .finish(self.owner, &outcome, &claimed.steps)
                    .await
                {
                    tracing::warn!(?error, "cannot end an interrupted run");
                }
                return;
            }
        };
        tracing::info!(run = %claimed.id, attempt = claimed.attempts, "resuming workflow run");
        let cancel = Arc::new(watch::channel(false).0);
        drop(
            self.spawn(Launch {
                run_id: claimed.id,
                definition: Arc::new(definition),
                start_data: claimed.input,
                run_as: claimed.run_as,
                recorded: claimed.steps,
                cancel,
                // The stored input holds no secret any more; http answers
                // of the steps still to run are redacted all the same.
                journal: Redacting::wrap(self.ports.journal.clone(), Secrets::default()),
                allow_private,
            })
            .await,
        );
    }
}

/// A webhook a role may call, for its API document.
#[derive(Debug, Clone)]
pub struct WebhookInfo {
    /// The URL segment.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// POST (else GET).
    pub post: bool,
    /// Answers with the outcome (else 202).
    pub sync: bool,
    /// Callable without a credential.
    pub public: bool,
}

/// Most published definitions kept parsed; past it the memory starts afresh.
const PUBLISHED_MAX: usize = 1_000;

/// Published snapshots, parsed once per publication rather than on every
/// webhook call; a publication is known by its workflow and `publishedAt`.
#[derive(Default)]
struct PublishedDefinitions(RwLock<HashMap<Uuid, Publication>>);

/// A parsed published snapshot and when it was published.
type Publication = (DateTime<Utc>, Arc<Definition>);

impl PublishedDefinitions {
    fn get(&self, target: &WebhookTarget) -> Result<Arc<Definition>, WorkflowError> {
        let known = self.0.read().ok().and_then(|map| {
            map.get(&target.workflow_id)
                .filter(|(at, _)| *at == target.published_at)
                .map(|(_, definition)| definition.clone())
        });
        if let Some(definition) = known {
            return Ok(definition);
        }
        let definition = Arc::new(Definition::from_stored(&target.definition)?);
        if let Ok(mut map) = self.0.write() {
            if map.len() >= PUBLISHED_MAX {
                map.clear();
            }
            map.insert(
                target.workflow_id,
                (target.published_at, definition.clone()),
            );
        }
        Ok(definition)
    }
}

/// A run to store and start.
struct RunStart {
    workflow_id: Uuid,
    test: bool,
    definition: Arc<Definition>,
    /// The `{ trigger, steps }` stored with the run.
    stored: Value,
    start_data: Value,
    run_as: Uuid,
    caller_id: Option<Uuid>,
    /// `workflows.http_allow_private` when the run starts.
    allow_private: bool,
}

/// A stored run to execute on this instance.
struct Launch {
    run_id: Uuid,
    definition: Arc<Definition>,
    start_data: Value,
    run_as: Uuid,
    /// Steps an earlier attempt recorded.
    recorded: Vec<StepRecord>,
    cancel: Arc<watch::Sender<bool>>,
    /// Where progress goes.
    journal: Arc<dyn RunJournal>,
    /// Whether http steps may reach private addresses.
    allow_private: bool,
}

/// A run just started: its id and its cancellation switch.
struct StartedRun {
    id: Uuid,
    cancel: Arc<watch::Sender<bool>>,
    /// Only pure steps: stored once, when it ends.
    stored_at_end: bool,
}

/// The journal of a run of pure steps: nothing to checkpoint; the run is
/// stored once, finished, in one statement.
struct RecordAtEnd {
    store: Arc<dyn WorkflowStore>,
    run: NewRun,
}

#[async_trait::async_trait]
impl RunJournal for RecordAtEnd {
    async fn checkpoint(
        &self,
        _: Uuid,
        _: Uuid,
        _: &[StepRecord],
    ) -> Result<Option<bool>, kernel::StoreError> {
        Ok(Some(false))
    }

    async fn renew(&self, _: Uuid, _: Uuid) -> Result<Option<bool>, kernel::StoreError> {
        Ok(Some(false))
    }

    async fn finish(
        &self,
        _: Uuid,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), kernel::StoreError> {
        self.store.record_run(&self.run, outcome, steps).await
    }
}

fn slug(raw: &str) -> Result<String, FieldError> {
    kernel::validate::slug(raw, "slug")
}

fn name(raw: &str) -> Result<String, FieldError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed.chars().count() > 200 {
        Err(FieldError::new("name", "must be 1 to 200 characters"))
    } else {
        Ok(trimmed.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_url_safe() {
        assert!(slug("order-intake-2").is_ok());
        for bad in ["", "Order", "a b", "-x", "a/b", &"a".repeat(65)] {
            assert!(slug(bad).is_err(), "{bad}");
        }
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// Any bytes, JSON-like text included: an object or array, or the
        /// refusal, never a panic.
        #[test]
        fn webhook_bodies_are_objects_arrays_or_refused(
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                "[\\[\\]{}\",:0-9a-z \\\\]{0,40}".prop_map(String::into_bytes),
            ]
        ) {
            match webhook_body(Some(&bytes)) {
                Ok(value) => prop_assert!(matches!(value, Value::Object(_) | Value::Array(_))),
                Err(error) => prop_assert!(matches!(error, crate::WorkflowError::InvalidWebhookPayload)),
            }
        }
    }

    #[test]
    fn no_body_is_null_and_scalars_are_refused() {
        assert_eq!(webhook_body(None).ok(), Some(Value::Null));
        for refused in [&b"1"[..], b"\"x\"", b"null", b"", b"{"] {
            assert!(webhook_body(Some(refused)).is_err());
        }
        assert!(webhook_body(Some(b"{\"a\":[1]}")).is_ok());
    }
}
