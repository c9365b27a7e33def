//! What the services and their workers need to know of the deployment,
//! with defaults that run on a developer's machine.

use std::time::Duration;

use kernel::store::PlanCacheMode;

/// Sender of outgoing email unless configured.
pub const DEFAULT_SMTP_FROM: &str = "Tessera <no-reply@localhost>";
/// Pause between two rounds of the email outbox worker.
pub const DEFAULT_MAIL_POLL: Duration = Duration::from_secs(1);
/// Where uploads go when no bucket is set.
pub const DEFAULT_FILES_DIR: &str = "data/files";
/// Base of links in emails unless configured.
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";
/// Most connections to PostgreSQL an instance holds unless configured.
pub const DEFAULT_DATABASE_POOL_SIZE: u32 = 32;
/// How long a workflow run's lease lasts without renewal unless configured.
pub const DEFAULT_WORKFLOW_LEASE: Duration = Duration::from_secs(30);
/// How long a claimed email stays with its sender unless configured.
pub const DEFAULT_OUTBOX_LEASE: Duration = Duration::from_secs(60);

/// How long a whole snapshot diff may run (API.md 21).
pub const DEFAULT_SNAPSHOT_DIFF_LIMIT: Duration = Duration::from_secs(30);

/// What the services and their workers need to know of the deployment.
#[derive(Debug, Clone)]
pub struct ServicesConfig {
    /// PostgreSQL URL.
    pub database_url: String,
    /// Streaming replicas of that database that serve reads (none: the
    /// primary serves every read).
    pub database_read_urls: Vec<String>,
    /// Most connections to PostgreSQL this instance holds.
    pub database_pool_size: u32,
    /// How PostgreSQL plans the prepared statements of this instance.
    pub database_plan_cache_mode: PlanCacheMode,
    /// A transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy) stands
    /// between this instance and PostgreSQL.
    pub database_transaction_pooler: bool,
    /// A direct connection (not through a transaction-mode pooler) for
    /// what needs a session of its own: migrations, index builds and the
    /// SQL console; `None`: `database_url`.
    pub database_migrate_url: Option<String>,
    /// Base of links in emails and of OAuth callbacks.
    pub public_url: String,
    /// Whether the workers drop caches on change notifications (they are
    /// checked by version regardless).
    pub listen_for_changes: bool,
    /// How long a workflow run's lease lasts without renewal.
    pub workflow_lease: Duration,
    /// Where uploaded files are kept.
    pub files: files::BlobsConfig,
    /// SMTP server the email worker sends through, e.g.
    /// `smtp://127.0.0.1:2525`; `None`: emails are logged and stay in the
    /// outbox.
    pub smtp_url: Option<String>,
    /// Sender of outgoing email.
    pub smtp_from: String,
    /// Pause between two rounds of the email outbox worker.
    pub mail_poll: Duration,
    /// How long a claimed email stays with its sender.
    pub outbox_lease: Duration,
    /// How long a whole snapshot diff may run before it is refused.
    pub snapshot_diff_limit: Duration,
}

impl ServicesConfig {
    /// A configuration for `database_url` with every other value at its
    /// default: no replica, 32 connections, generic plans, links to
    /// `http://127.0.0.1:8080`, files under `data/files`, emails logged.
    pub fn for_database(database_url: &str) -> Self {
        Self {
            database_url: database_url.to_owned(),
            database_read_urls: Vec::new(),
            database_pool_size: DEFAULT_DATABASE_POOL_SIZE,
            database_plan_cache_mode: PlanCacheMode::ForceGenericPlan,
            database_transaction_pooler: false,
            database_migrate_url: None,
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            listen_for_changes: true,
            workflow_lease: DEFAULT_WORKFLOW_LEASE,
            files: files::BlobsConfig::Local(DEFAULT_FILES_DIR.into()),
            smtp_url: None,
            smtp_from: DEFAULT_SMTP_FROM.to_owned(),
            mail_poll: DEFAULT_MAIL_POLL,
            outbox_lease: DEFAULT_OUTBOX_LEASE,
            snapshot_diff_limit: DEFAULT_SNAPSHOT_DIFF_LIMIT,
        }
    }
}
