//! Prometheus metrics on an address of their own (`TESSERA_METRICS_BIND`):
//! requests by route template and status with their latency, the connection
//! pool, the email outbox, workflow runs and their queue, cache
//! invalidations. Recorded through the `metrics` facade; each scrape reads
//! the database-side figures in one statement.

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use services::Services;

/// Latency buckets of the request histogram, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

struct Scrape {
    handle: PrometheusHandle,
    services: Services,
}

/// Installs the process's recorder and binds the metrics server on `bind`.
pub fn serve(bind: &str, services: Services) -> anyhow::Result<Server> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("tessera_http_request_duration_seconds".into()),
            &LATENCY_BUCKETS,
        )?
        .install_recorder()
        .context("installing the metrics recorder")?;
    describe();
    http::record_metrics();
    let listener =
        TcpListener::bind(bind).with_context(|| format!("cannot listen on {bind} for metrics"))?;
    let scrape = web::Data::new(Scrape { handle, services });
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(scrape.clone())
            .route("/metrics", web::get().to(render))
    })
    .workers(1)
    .listen(listener)?
    .shutdown_timeout(1)
    .run())
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "tessera_http_requests_total",
        "Requests answered, by method, route template and status"
    );
    describe_histogram!(
        "tessera_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer, by method, route template and status"
    );
    describe_counter!(
        "tessera_workflow_runs_total",
        "Workflow runs this instance ended, by status"
    );
    describe_counter!(
        "tessera_cache_invalidations_total",
        "Caches dropped on a change notification, by channel"
    );
    describe_gauge!(
        "tessera_db_pool_connections",
        "Connections of this instance's pool, by state"
    );
    describe_gauge!("tessera_outbox_waiting", "Emails waiting in the outbox");
    describe_gauge!(
        "tessera_outbox_oldest_seconds",
        Unit::Seconds,
        "Age of the oldest waiting email"
    );
    describe_gauge!(
        "tessera_workflow_runs_running",
        "Workflow runs RUNNING on any instance"
    );
    describe_gauge!(
        "tessera_row_events_waiting",
        "Row events no run was started for yet"
    );
    describe_counter!(
        "tessera_database_reads_total",
        "Reads a replica could serve, by where they ran (primary or a replica's host:port)"
    );
    describe_counter!(
        "tessera_replica_fallbacks_total",
        "Reads sent to the primary instead of a replica, by reason (lag, behind, stale, conflict, down, error)"
    );
    describe_gauge!(
        "tessera_replica_lag_seconds",
        Unit::Seconds,
        "How far each read replica's replay is behind the primary"
    );
    describe_gauge!(
        "tessera_replica_up",
        "Whether each read replica answers as a standby (1) or not (0)"
    );
}

/// `GET /metrics`: refreshes the database-side gauges, then renders all.
async fn render(scrape: web::Data<Scrape>) -> HttpResponse {
    match scrape.services.operations().await {
        Ok(ops) => {
            let pool = |state: &'static str, value: f64| {
                metrics::gauge!("tessera_db_pool_connections", "state" => state).set(value);
            };
            pool("idle", ops.pool_idle as f64);
            pool("in_use", f64::from(ops.pool_size) - ops.pool_idle as f64);
            metrics::gauge!("tessera_outbox_waiting").set(ops.outbox_waiting as f64);
            metrics::gauge!("tessera_outbox_oldest_seconds").set(ops.outbox_oldest_seconds);
            metrics::gauge!("tessera_workflow_runs_running").set(ops.runs_running as f64);
            metrics::gauge!("tessera_row_events_waiting").set(ops.row_events_waiting as f64);
        }
        Err(error) => tracing::warn!(%error, "metrics: the database figures could not be read"),
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(scrape.handle.render())
}
