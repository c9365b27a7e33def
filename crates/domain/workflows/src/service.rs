//! The workflow service: what its three jobs share. Definitions for the
//! Admin API are in `definitions`, webhook calls and the result route in
//! `webhook`, and the runs (started, awaited, resumed, purged) in `runner`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use auth::SignInService;
use kernel::new_id;
use kernel::settings::{PUBLIC_RATE_LIMIT_KEY, default_of};
use settings::SettingsService;
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::children::StoreChildren;
use crate::engine::{ChildRuns, Ports};
use crate::runner::CONCURRENT_RUNS_MAX;
use crate::store::WorkflowStore;
use crate::webhook::PublishedDefinitions;

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
    pub(crate) store: Arc<dyn WorkflowStore>,
    pub(crate) auth: SignInService,
    pub(crate) settings: SettingsService,
    pub(crate) ports: Ports,
    /// This instance, as the owner of the leases it holds.
    pub(crate) owner: Uuid,
    pub(crate) options: RunnerOptions,
    /// Free places for runs executing on this instance.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) published: Arc<PublishedDefinitions>,
    /// Starts the child runs of call steps, leased to this instance.
    pub(crate) children: Arc<dyn ChildRuns>,
    /// The public webhooks' rate limit while the setting is not stored,
    /// read from the registry once.
    pub(crate) rate_limit_default: i64,
    /// Set by [`WorkflowService::drain`]: the worker claims nothing more.
    pub(crate) stopping: Arc<AtomicBool>,
}

impl WorkflowService {
    /// A service over `store`, running steps through `ports`.
    pub fn new(
        store: Arc<dyn WorkflowStore>,
        auth: SignInService,
        settings: SettingsService,
        ports: Ports,
        options: RunnerOptions,
    ) -> Self {
        let owner = new_id();
        let children = Arc::new(StoreChildren {
            store: store.clone(),
            owner,
            lease: options.lease,
        });
        Self {
            store,
            auth,
            settings,
            ports,
            owner,
            options,
            children,
            slots: Arc::new(Semaphore::new(CONCURRENT_RUNS_MAX)),
            published: Arc::default(),
            rate_limit_default: default_of(PUBLIC_RATE_LIMIT_KEY)
                .as_i64()
                .unwrap_or_default(),
            stopping: Arc::default(),
        }
    }
}
