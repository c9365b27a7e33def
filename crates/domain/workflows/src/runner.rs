//! Runs: started and executed on this instance (bounded by its slots),
//! awaited by a synchronous caller (following a run another instance took
//! over), and the background work that claims row events, resumes runs
//! whose lease expired, and purges old runs.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kernel::new_id;
use serde_json::{Value, json};
use tokio::sync::watch;
use uuid::Uuid;

use crate::engine::{self, Execution, Ports, RunJournal, RunUser};
use crate::error::WorkflowError;
use crate::model::{Definition, OnTimeout};
use crate::redact::{Redacting, Secrets};
use crate::run::{INTERRUPTED, Outcome, RunError, RunStatus, StepRecord};
use crate::service::WorkflowService;
use crate::store::{ClaimedRun, NewRun, WorkflowStore};

/// Runs one instance executes at once; more wait for a slot.
pub(crate) const CONCURRENT_RUNS_MAX: usize = 1024;
/// A run resumed more often than this is failed as interrupted.
const ATTEMPTS_MAX: i32 = 3;
/// Runs or events claimed per pass of the background worker.
const CLAIM_BATCH: u64 = 32;
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

impl WorkflowService {
    /// Stores a new run and executes it in the background.
    pub(crate) async fn start(
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
            parent_run_id: None,
            chain: vec![workflow_id],
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
                chain: vec![workflow_id],
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
            chain,
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
                chain,
                budget: engine::step_budget(),
                children: service.children.clone(),
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
    pub(crate) async fn await_outcome(
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
    /// events and schedule ticks, and purges runs past
    /// `workflows.run_retention_days`.
    pub async fn work(self) {
        tokio::join!(self.clone().poll(), self.schedule());
    }

    /// The polling part of [`WorkflowService::work`]: orphans, row events, purges.
    async fn poll(self) {
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
        let mut more = false;
        for batch in [Batch::Events, Batch::Orphans] {
            let claimed = match batch {
                Batch::Events => self.store.claim_events(self.owner, lease, CLAIM_BATCH),
                Batch::Orphans => self.store.claim_orphans(self.owner, lease, CLAIM_BATCH),
            }
            .await?;
            more |= claimed.len() as u64 >= CLAIM_BATCH;
            if claimed.is_empty() {
                continue;
            }
            // The settings as they are now, read after the claim: never
            // older than a change answered before an event was queued
            // (with or without a notification of it).
            // (the cached ones when that read fails: the runs are claimed,
            // and waiting out their lease helps nobody).
            let settings = match self.settings.heeded().await {
                Ok(settings) => settings,
                Err(_) => self.settings.current().await?,
            };
            let allow_private = settings.http_allow_private();
            for run in claimed {
                self.resume(run, allow_private).await;
            }
        }
        let settings = self.settings.current().await?;
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
    pub(crate) async fn resume(&self, claimed: ClaimedRun, allow_private: bool) {
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
                chain: claimed.chain,
            })
            .await,
        );
    }
}

/// A run to store and start.
pub(crate) struct RunStart {
    pub(crate) workflow_id: Uuid,
    pub(crate) test: bool,
    pub(crate) definition: Arc<Definition>,
    /// The `{ trigger, steps }` stored with the run.
    pub(crate) stored: Value,
    pub(crate) start_data: Value,
    pub(crate) run_as: Uuid,
    pub(crate) caller_id: Option<Uuid>,
    /// `workflows.http_allow_private` when the run starts.
    pub(crate) allow_private: bool,
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
    /// The workflows of its calling chain, its own last.
    chain: Vec<Uuid>,
}

/// A run just started: its id and its cancellation switch.
pub(crate) struct StartedRun {
    pub(crate) id: Uuid,
    cancel: Arc<watch::Sender<bool>>,
    /// Only pure steps: stored once, when it ends.
    pub(crate) stored_at_end: bool,
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

    fn child(self: Arc<Self>, _: &[StepRecord]) -> Arc<dyn RunJournal> {
        self
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
