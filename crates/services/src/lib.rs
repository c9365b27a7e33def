//! Tessera's domain services over one PostgreSQL pool, wired together: the
//! one bundle that the HTTP layer serves and that a host calls directly
//! (docs/embedding.md). Nothing here knows HTTP: a host that serves no
//! routes links no web framework.

pub mod config;
pub mod database;
mod workers;

pub use config::ServicesConfig;
pub use workers::Workers;
/// The domain crates, for a host that calls them through this bundle.
pub use {
    audit, auth, data, files, kernel, oauth, permissions, realtime, schema, settings, snapshot,
    sql_console, views, workflows,
};

use std::sync::Arc;

use anyhow::Context;
use kernel::Clock;
use store_pg::{PgStore, PoolOptions};

/// The services of one process, over one pool.
#[derive(Clone)]
pub struct Services {
    /// The store behind every service.
    store: PgStore,
    /// The configuration the services were built with, for their workers.
    config: Arc<ServicesConfig>,
    /// Credentials, sign-in, sessions and tokens.
    pub sign_in: auth::SignInService,
    /// Accounts and their administration.
    pub accounts: auth::AccountService,
    /// Passkeys: registration, sign-in and management.
    pub passkeys: auth::PasskeyService,
    /// Sign-in with providers.
    pub oauth: oauth::OAuthService,
    /// The runtime settings.
    pub settings: settings::SettingsService,
    /// Roles.
    pub roles: permissions::RoleService,
    /// Tables and resources.
    pub schema: schema::SchemaService,
    /// Configuration snapshots.
    pub snapshots: snapshot::SnapshotService,
    /// Grants.
    pub grants: permissions::GrantService,
    /// The Data API.
    pub data: data::DataService,
    /// Workflows.
    pub workflows: workflows::WorkflowService,
    /// DataViews and dashboards.
    pub views: views::ViewService,
    /// The SQL console.
    pub sql: sql_console::SqlConsole,
    /// Realtime subscriptions.
    pub realtime: realtime::RealtimeService,
    /// Files.
    pub files: files::FileService,
    /// The audit log.
    pub audit: audit::AuditService,
}

impl Services {
    /// Connects to the database (creating and migrating it) and builds the services.
    pub async fn start(config: &ServicesConfig, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        database::create_if_missing(database::direct_url(config)?).await?;
        let pool = PoolOptions {
            max_connections: config.database_pool_size,
            plan_cache_mode: config.database_plan_cache_mode,
            transaction_pooler: config.database_transaction_pooler,
            ..PoolOptions::default()
        };
        let db = store_pg::connect(&config.database_url, pool)
            .await
            .context("cannot connect to the database")?;
        Self::over(config, db, clock).await
    }

    /// A lazily connecting pool on each of `config.database_read_urls`,
    /// named by its host and port.
    async fn replicas(
        config: &ServicesConfig,
    ) -> anyhow::Result<Vec<(String, sea_orm::DatabaseConnection)>> {
        let pool = PoolOptions {
            max_connections: config.database_pool_size,
            plan_cache_mode: config.database_plan_cache_mode,
            lazy: true,
            transaction_pooler: config.database_transaction_pooler,
            ..PoolOptions::default()
        };
        let mut replicas = Vec::with_capacity(config.database_read_urls.len());
        for url in &config.database_read_urls {
            let parsed = url::Url::parse(url)
                .context("a TESSERA_DATABASE_READ_URLS entry is not a valid URL")?;
            let name = format!(
                "{}:{}",
                parsed.host_str().unwrap_or_default(),
                parsed.port().unwrap_or(5432)
            );
            let db = store_pg::connect(url, pool)
                .await
                .context("a TESSERA_DATABASE_READ_URLS entry cannot be used")?;
            replicas.push((name, db));
        }
        Ok(replicas)
    }

    /// Migrates the database behind `db` (a pool the caller made, such as
    /// one from [`store_pg::connect`]) and builds the services over it.
    /// `config.database_url` is not read (behind a transaction pooler,
    /// `config.database_migrate_url` is: migrations, index builds and the
    /// SQL console connect there); `config.database_read_urls` are
    /// connected to as reads need them.
    pub async fn over(
        config: &ServicesConfig,
        db: sea_orm::DatabaseConnection,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let mut store = PgStore::new(db.clone(), clock.clone());
        if config.database_transaction_pooler {
            let direct = database::direct_pool(database::direct_url(config)?).await?;
            database::migrate(&direct).await?;
            store = store.behind_transaction_pooler(direct);
        } else {
            database::migrate(&db).await?;
        }
        let store = store
            .with_replicas(Self::replicas(config).await?)
            .with_diff_limit(config.snapshot_diff_limit);
        store.watch_replicas();
        let settings = settings::SettingsService::new(Arc::new(store.clone()));
        // One hashing pool for the process: sign-in and accounts share it.
        let hasher = auth::HashPool::per_core();
        let sign_in = auth::SignInService::new(
            Arc::new(store.clone()),
            settings.clone(),
            clock.clone(),
            hasher.clone(),
        );
        let accounts = auth::AccountService::new(
            Arc::new(store.clone()),
            settings.clone(),
            clock.clone(),
            hasher,
            &config.public_url,
        );
        let passkeys = auth::PasskeyService::new(sign_in.clone(), &config.public_url);
        let data = data::DataService::new(Arc::new(store.clone()), clock.clone(), sign_in.clone());
        let workflow_store: Arc<dyn workflows::WorkflowStore> = Arc::new(store.clone());
        let ports = workflows::Ports {
            data: Arc::new(workflows::DataSteps::new(
                data.clone(),
                workflow_store.clone(),
            )),
            outbound: Arc::new(
                outbound::HttpClient::new().context("cannot build the HTTP client")?,
            ),
            scripts: Arc::new(workflows::SettledScripts {
                pool: scripts::ScriptPool::default(),
                settings: settings.clone(),
            }),
            journal: Arc::new(store.clone()),
            clock: clock.clone(),
            renew_every: config.workflow_lease / 3,
        };
        let options = workflows::RunnerOptions {
            lease: config.workflow_lease,
            ..workflows::RunnerOptions::default()
        };
        let workflows = workflows::WorkflowService::new(
            workflow_store,
            sign_in.clone(),
            settings.clone(),
            ports,
            options,
        );
        // The Data API runs its write hooks through the workflow executor.
        data.set_hooks(workflows.write_hooks());
        let views = views::ViewService::new(Arc::new(store.clone()), data.clone(), clock.clone());
        Ok(Self {
            oauth: oauth::OAuthService::new(
                sign_in.clone(),
                settings.clone(),
                Arc::new(store.clone()),
                Arc::new(store.clone()),
                clock.clone(),
                &config.public_url,
            )
            .context("cannot build the OAuth HTTP client")?,
            sql: sql_console::SqlConsole::new(Arc::new(store.clone()), settings.clone()),
            realtime: realtime::RealtimeService::new(
                Arc::new(store.clone()),
                data.clone(),
                sign_in.clone(),
                settings.clone(),
            ),
            files: files::FileService::new(
                data.clone(),
                Arc::new(store.clone()),
                files::Blobs::open(&config.files)
                    .map_err(|e| anyhow::anyhow!("files storage: {e}"))?,
                settings.clone(),
            ),
            audit: audit::AuditService::new(Arc::new(store.clone())),
            roles: permissions::RoleService::new(Arc::new(store.clone()), clock.clone()),
            schema: schema::SchemaService::new(Arc::new(store.clone()), clock.clone()),
            snapshots: snapshot::SnapshotService::new(Arc::new(store.clone())),
            grants: permissions::GrantService::new(Arc::new(store.clone()), clock),
            workflows,
            views,
            data,
            sign_in,
            accounts,
            passkeys,
            settings,
            store,
            config: Arc::new(config.clone()),
        })
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> bool {
        self.store.ping().await
    }

    /// What an operator watches, read in one statement: the outbox, the
    /// workflow queue and the connection pool.
    pub async fn operations(&self) -> Result<kernel::store::Operations, kernel::StoreError> {
        self.store.operations().await
    }

    /// Creates the configured administrator when no active administrator exists.
    /// Answers the created user's email.
    pub async fn bootstrap_admin(
        &self,
        email: &str,
        password: &str,
    ) -> anyhow::Result<Option<String>> {
        let admins = self
            .accounts
            .role_members(kernel::ADMINISTRATORS_ROLE_ID)
            .await?;
        if admins.iter().any(|u| u.active) {
            return Ok(None);
        }
        let user = self.accounts.ensure_admin(email, password, None).await?;
        Ok(Some(user.email))
    }
}
