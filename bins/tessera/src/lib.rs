//! Wiring of the Tessera server: configuration, database, services and the
//! HTTP server. `main.rs` adds the command line; the testkit boots the same
//! [`Application`] in-process.

pub mod config;
pub mod database;
mod metrics;

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{HttpServer, web};
use anyhow::Context;
use auth::AuthService;
use http::{AppState, ReadinessCheck};
use kernel::Clock;
use permissions::RoleService;
use store_pg::{PgStore, PoolOptions};

pub use crate::config::Config;

/// The services of one process, over one pool.
#[derive(Clone)]
pub struct Services {
    /// The store behind every service.
    pub store: PgStore,
    /// Sign-in, credentials and users.
    pub auth: AuthService,
    /// Sign-in with providers.
    pub oauth: oauth::OAuthService,
    /// The runtime settings.
    pub settings: auth::SettingsService,
    /// Roles.
    pub roles: RoleService,
    /// Tables and resources.
    pub schema: schema::SchemaService,
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
    /// Files.
    pub files: files::FileService,
}

impl Services {
    /// Connects to the database (creating and migrating it) and builds the services.
    pub async fn start(config: &Config, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        database::create_if_missing(&config.database_url).await?;
        let pool = PoolOptions {
            max_connections: config.database_pool_size,
            plan_cache_mode: config.database_plan_cache_mode,
            ..PoolOptions::default()
        };
        let db = store_pg::connect(&config.database_url, pool)
            .await
            .context("cannot connect to the database")?;
        database::migrate(&db).await?;
        let store = PgStore::new(db, clock.clone());
        if config.listen_for_changes {
            store.watch_caches();
        }
        let auth = AuthService::new(Arc::new(store.clone()), clock.clone(), &config.public_url);
        let settings = auth::SettingsService::new(Arc::new(store.clone()));
        let data = data::DataService::new(Arc::new(store.clone()), clock.clone(), auth.clone());
        let workflow_store: Arc<dyn workflows::WorkflowStore> = Arc::new(store.clone());
        let ports = workflows::Ports {
            data: Arc::new(workflows::DataSteps::new(
                data.clone(),
                workflow_store.clone(),
            )),
            outbound: Arc::new(
                outbound::HttpClient::new().context("cannot build the HTTP client")?,
            ),
            journal: Arc::new(store.clone()),
            clock: clock.clone(),
            renew_every: config.workflow_lease / 3,
        };
        let options = workflows::RunnerOptions {
            lease: config.workflow_lease,
            ..workflows::RunnerOptions::default()
        };
        Ok(Self {
            workflows: workflows::WorkflowService::new(
                workflow_store,
                auth.clone(),
                settings.clone(),
                ports,
                options,
            ),
            oauth: oauth::OAuthService::new(
                auth.clone(),
                Arc::new(store.clone()),
                Arc::new(store.clone()),
                clock.clone(),
                &config.public_url,
            )
            .context("cannot build the OAuth HTTP client")?,
            views: views::ViewService::new(Arc::new(store.clone()), data.clone(), clock.clone()),
            sql: sql_console::SqlConsole::new(Arc::new(store.clone()), settings.clone()),
            files: files::FileService::new(
                data.clone(),
                Arc::new(store.clone()),
                files::Blobs::open(&config.files)
                    .map_err(|e| anyhow::anyhow!("files storage: {e}"))?,
                settings.clone(),
            ),
            data,
            auth,
            settings,
            roles: RoleService::new(Arc::new(store.clone()), clock.clone()),
            schema: schema::SchemaService::new(Arc::new(store.clone()), clock.clone()),
            grants: permissions::GrantService::new(Arc::new(store.clone()), clock),
            store,
        })
    }

    /// Creates the configured administrator when no active administrator exists.
    /// Answers the created user's email.
    pub async fn bootstrap_admin(
        &self,
        email: &str,
        password: &str,
    ) -> anyhow::Result<Option<String>> {
        let admins = self
            .auth
            .role_members(kernel::ADMINISTRATORS_ROLE_ID)
            .await?;
        if admins.iter().any(|u| u.active) {
            return Ok(None);
        }
        let user = self.auth.ensure_admin(email, password, None).await?;
        Ok(Some(user.email))
    }
}

/// A bound, not yet running HTTP server (and the metrics server, when one
/// is configured).
pub struct Application {
    server: Server,
    metrics: Option<Server>,
    port: u16,
}

impl Application {
    /// Binds the listener, starts the email outbox worker and builds the
    /// server over `services`. Must run inside the Tokio runtime.
    pub fn build(config: &Config, services: &Services) -> anyhow::Result<Self> {
        let mailer = mail::MailWorker::new(
            Arc::new(services.store.clone()),
            config.smtp_url.as_deref(),
            &config.smtp_from,
            config.mail_poll,
            config.outbox_lease,
        )?;
        let listener = TcpListener::bind(&config.bind)
            .with_context(|| format!("cannot listen on {}", config.bind))?;
        let port = listener.local_addr()?.port();
        let store = services.store.clone();
        let ready: ReadinessCheck = Arc::new(move || {
            let store = store.clone();
            Box::pin(async move { store.ping().await })
        });
        let mcp_server = mcp::McpServer::new(
            services.data.clone(),
            services.views.clone(),
            services.workflows.clone(),
        );
        let state = web::Data::new(AppState {
            auth: services.auth.clone(),
            oauth: services.oauth.clone(),
            settings: services.settings.clone(),
            roles: services.roles.clone(),
            schema: services.schema.clone(),
            grants: services.grants.clone(),
            data: services.data.clone(),
            workflows: services.workflows.clone(),
            views: services.views.clone(),
            sql: services.sql.clone(),
            files: services.files.clone(),
            mcp: Arc::new(mcp_server.clone().into_service()),
            mcp_server,
            audit: audit::AuditService::new(Arc::new(services.store.clone())),
            ready,
            trusted_proxies: config.trusted_proxies.clone(),
            max_body_bytes: config.max_body_bytes,
        });
        if config.smtp_url.is_none() {
            tracing::warn!("TESSERA_SMTP_URL is not set: emails stay in the outbox and are logged");
        }
        tokio::spawn(mailer.run());
        tokio::spawn(services.workflows.clone().work());
        let metrics = config
            .metrics_bind
            .as_deref()
            .map(|bind| metrics::serve(bind, services.store.clone()))
            .transpose()?;
        let document = http::AdminDocument::shared(&http::openapi_document());
        let server = HttpServer::new(move || http::app(state.clone(), document.clone()))
            .listen(listener)?
            .shutdown_timeout(config.shutdown_grace.as_secs())
            .run();
        Ok(Self {
            server,
            metrics,
            port,
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until SIGTERM or SIGINT; in-flight requests finish first.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        // The metrics server stops on the same signals by itself.
        if let Some(metrics) = self.metrics {
            tokio::spawn(metrics);
        }
        self.server.await
    }
}
