//! Wiring of the Tessera server: configuration, database, services and the
//! HTTP server. `main.rs` adds the command line; the testkit boots the same
//! [`Application`] in-process.

pub mod config;
mod metrics;

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{Server, ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use http::{AppState, ReadinessCheck};

pub use crate::config::Config;
pub use services::{Services, ServicesConfig, database};
/// The crates a host embedding Tessera calls directly (docs/embedding.md).
pub use {
    audit, auth, data, files, http, kernel, mcp, oauth, permissions, realtime, schema, services,
    settings, sql_console, store_pg, views, workflows,
};

/// Tessera's HTTP face and background workers over [`Services`], for a
/// host's own actix-web application (docs/embedding.md); the standalone
/// [`Application`] is built from it too.
#[derive(Clone)]
pub struct Tessera {
    services: Services,
    state: web::Data<AppState>,
    document: web::Data<http::AdminDocument>,
    shutdown_grace: std::time::Duration,
    workers: Arc<std::sync::Mutex<Option<services::Workers>>>,
}

impl Tessera {
    /// Tessera over `services`, its routes to be mounted at `base_path`:
    /// empty, or `/` and segments of letters, digits, `_`, `-` and `.` with
    /// no trailing slash (`/backend`, `/api/v1/tessera`). Emails and OAuth
    /// callbacks link to `config.public_url`, which should name the same
    /// place (`https://example.com/backend`).
    pub fn new(config: &Config, services: &Services, base_path: &str) -> anyhow::Result<Self> {
        check_base_path(base_path)?;
        let pinged = services.clone();
        let ready: ReadinessCheck = Arc::new(move || {
            let services = pinged.clone();
            Box::pin(async move { services.ping().await })
        });
        let mcp_server = mcp::McpServer::new(
            services.data.clone(),
            services.views.clone(),
            services.workflows.clone(),
        );
        let state = web::Data::new(AppState {
            mcp: Arc::new(mcp_server.clone().into_service()),
            mcp_server,
            services: services.clone(),
            ready,
            trusted_proxies: config.trusted_proxies.clone(),
            max_body_bytes: config.max_body_bytes,
            base_path: base_path.to_owned(),
        });
        Ok(Self {
            services: services.clone(),
            document: http::AdminDocument::shared(base_path),
            state,
            shutdown_grace: config.shutdown_grace,
            workers: Arc::default(),
        })
    }

    /// Every Tessera route under the base path, with Tessera's middleware
    /// (error envelope, security headers, CORS, request spans): give it to
    /// `App::service` in each worker's application factory.
    pub fn scope(
        &self,
    ) -> actix_web::Scope<
        impl ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = ServiceResponse<impl MessageBody + use<>>,
            Error = actix_web::Error,
            InitError = (),
        > + use<>,
    > {
        http::scope(self.state.clone(), self.document.clone())
    }

    /// Starts the background workers of `Services::start_workers` (email
    /// outbox, workflow runs, cache watcher) on the current Tokio runtime.
    /// Call once per process.
    pub fn start_workers(&self) -> anyhow::Result<()> {
        let workers = self.services.start_workers()?;
        if let Ok(mut slot) = self.workers.lock() {
            *slot = Some(workers);
        }
        Ok(())
    }

    /// Once the server has stopped taking requests: stops the workers
    /// ([`services::Workers::stop`] with `shutdown_grace`), so that another
    /// instance takes their emails and runs over at once rather than when
    /// the leases expire.
    pub async fn stop(&self) {
        let workers = self.workers.lock().ok().and_then(|mut w| w.take());
        // Without workers, runs that requests started still get their grace.
        let released = match workers {
            Some(workers) => workers.stop(self.shutdown_grace).await,
            None => self
                .services
                .workflows
                .drain(self.shutdown_grace)
                .await
                .map_err(anyhow::Error::from),
        };
        match released {
            Ok(released) => tracing::info!(released, "stopped; runs still going were released"),
            Err(error) => tracing::warn!(?error, "stopped; releasing the runs failed"),
        }
    }
}

/// Refuses a mount path the router would not match as written.
fn check_base_path(base_path: &str) -> anyhow::Result<()> {
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    let fine = base_path.is_empty()
        || base_path
            .strip_prefix('/')
            .is_some_and(|rest| rest.split('/').all(segment_ok));
    anyhow::ensure!(
        fine,
        "the base path `{base_path}` must be empty or like `/backend` (no trailing slash)"
    );
    Ok(())
}

/// A bound, not yet running HTTP server (and the metrics server, when one
/// is configured).
pub struct Application {
    tessera: Tessera,
    server: Server,
    metrics: Option<Server>,
    port: u16,
}

impl Application {
    /// Binds the listener, starts the background workers and builds the
    /// server over `services`. Must run inside the Tokio runtime.
    pub fn build(config: &Config, services: &Services) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(&config.bind)
            .with_context(|| format!("cannot listen on {}", config.bind))?;
        Self::listening(listener, config, services)
    }

    /// As [`Application::build`], on a listener already bound (the
    /// configuration's `bind` is not read).
    pub fn listening(
        listener: TcpListener,
        config: &Config,
        services: &Services,
    ) -> anyhow::Result<Self> {
        let tessera = Tessera::new(config, services, "")?;
        let port = listener.local_addr()?.port();
        tessera.start_workers()?;
        let metrics = config
            .metrics_bind
            .as_deref()
            .map(|bind| metrics::serve(bind, services.clone()))
            .transpose()?;
        let routes = tessera.clone();
        let server = HttpServer::new(move || App::new().service(routes.scope()))
            .listen(listener)?
            .shutdown_timeout(config.shutdown_grace.as_secs())
            .run();
        Ok(Self {
            tessera,
            server,
            metrics,
            port,
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until SIGTERM or SIGINT; in-flight requests finish first, then
    /// the background workers stop and hand their work over ([`Tessera::stop`]).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        // The metrics server stops on the same signals by itself.
        if let Some(metrics) = self.metrics {
            tokio::spawn(metrics);
        }
        let served = self.server.await;
        self.tessera.stop().await;
        served
    }
}
