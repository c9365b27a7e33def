//! PostgreSQL implementation of every store trait, with sea-orm.

mod account_store;
mod audit_store;
mod auth_store;
mod cache;
mod data_store;
mod db;
mod entity;
mod errors;
mod file_store;
mod grant_store;
mod json_rows;
mod lane;
mod oauth_store;
mod outbox_store;
mod query;
mod realtime_store;
mod replicas;
mod role_store;
mod rows;
mod schema_store;
mod session;
mod settings_store;
mod snapshot_store;
mod sql_console_store;
mod sql_values;
mod timeout;
mod view_store;
mod workflow_store;

use std::sync::Arc;
use std::time::Duration;

use crate::db::Txn;
use crate::query::{Commit, Query, Stored};
use audit::AuditEvent;
use kernel::{StoreError, new_id};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend,
    DbErr, EntityTrait, QueryResult, Set, Statement, Value,
};
use uuid::Uuid;

pub(crate) use crate::errors::{map_err, map_sqlx, pg_error};
pub(crate) use crate::rows::versions_of;

/// The store of the whole service over one connection pool.
#[derive(Clone)]
pub struct PgStore {
    db: db::Db,
    settings: Arc<cache::VersionedCache<kernel::settings::Settings>>,
    catalog: Arc<cache::VersionedCache<data_store::Catalog>>,
    seen: Arc<cache::SeenVersions>,
    reads: Arc<lane::ReadLane>,
    clock: Arc<dyn kernel::Clock>,
    /// Wakes the realtime hub; its LISTEN starts with the first subscriber.
    realtime_wake: Arc<std::sync::OnceLock<Arc<tokio::sync::Notify>>>,
    /// `data.statement_timeout_ms` on the pool's connections.
    statement_timeout: Arc<timeout::StatementTimeout>,
    /// Streaming replicas serving reads; none by default.
    replicas: Arc<replicas::Replicas>,
    /// How long a whole snapshot diff may run.
    diff_limit: Duration,
    /// Behind a transaction pooler, the pool of direct connections for
    /// what needs a session of its own (index builds, the SQL console).
    direct: Option<sea_orm::sqlx::PgPool>,
}

/// Pool size, timeouts and how PostgreSQL plans the pool's statements.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// Most connections held open.
    pub max_connections: u32,
    /// How long a request waits for a free connection.
    pub acquire_timeout: Duration,
    /// PostgreSQL's `plan_cache_mode` on every connection.
    pub plan_cache_mode: PlanCacheMode,
    /// Connect when a connection is first needed (a read replica that is
    /// down at start does not stop the server), not at once.
    pub lazy: bool,
    /// A transaction-mode pooler stands in front of PostgreSQL: the
    /// connections carry no setting of their own (a pooler refuses or
    /// drops them), see [`PgStore::behind_transaction_pooler`].
    pub transaction_pooler: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 32,
            acquire_timeout: Duration::from_secs(3),
            plan_cache_mode: PlanCacheMode::ForceGenericPlan,
            lazy: false,
            transaction_pooler: false,
        }
    }
}

/// How PostgreSQL plans the pool's prepared statements, and what an
/// operator watches (kernel types, so that hosts name them without this
/// crate).
pub use kernel::store::{Operations, PlanCacheMode};

/// Opens a pool on `url`.
pub async fn connect(url: &str, options: PoolOptions) -> Result<DatabaseConnection, DbErr> {
    let mut connect = ConnectOptions::new(loopback_without_tls(url));
    connect
        .max_connections(options.max_connections)
        .min_connections(1)
        .acquire_timeout(options.acquire_timeout)
        .connect_timeout(options.acquire_timeout)
        .connect_lazy(options.lazy)
        // A ping only for connections idle a while, not a round trip per query.
        .test_before_acquire_if_idle_for(Duration::from_secs(30))
        // Connections opened before the statement timeout changed retire.
        .map_sqlx_postgres_before_acquire(|_, meta| {
            Box::pin(async move { Ok(timeout::current(meta.age)) })
        })
        .map_sqlx_postgres_opts(move |pg| match options.transaction_pooler {
            // Statements are unnamed there, so planned afresh each time.
            true => pg.extra_float_digits(None),
            false => pg.options([("plan_cache_mode", options.plan_cache_mode.as_str())]),
        })
        .sqlx_logging(false);
    Database::connect(connect).await
}

/// `url` with `sslmode=disable` added when it names a loopback host and
/// says nothing of TLS. The driver otherwise prefers TLS whenever the server
/// offers it, and on loopback encryption protects nothing while costing
/// every query (about a tenth of the Data API's throughput). Any `sslmode`
/// given, and every other host, is left as written.
fn loopback_without_tls(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_owned();
    };
    // `postgres:` is not a special scheme: its IPv4 hosts come as names.
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => {
            name == "localhost"
                || name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let says_tls = parsed
        .query_pairs()
        .any(|(key, _)| key == "sslmode" || key == "ssl-mode");
    if !loopback || says_tls {
        return url.to_owned();
    }
    parsed.query_pairs_mut().append_pair("sslmode", "disable");
    parsed.into()
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
    /// A store over an open pool; the times it writes come from `clock`.
    pub fn new(db: DatabaseConnection, clock: Arc<dyn kernel::Clock>) -> Self {
        let reads = Arc::new(lane::ReadLane::new(
            db.get_postgres_connection_pool().clone(),
            None,
        ));
        Self {
            db: db::Db::direct(db),
            reads,
            settings: Arc::default(),
            catalog: Arc::default(),
            seen: Arc::default(),
            clock,
            realtime_wake: Arc::default(),
            statement_timeout: timeout::StatementTimeout::new(),
            replicas: Arc::default(),
            diff_limit: Duration::from_secs(30),
            direct: None,
        }
    }

    /// This store for a database behind a transaction-mode pooler (see
    /// the module `db`): every statement unnamed and in a transaction,
    /// the statement timeout set by each; index builds and the SQL console
    /// on `direct`, a pool of direct connections (they need a session of
    /// their own). Before [`PgStore::with_replicas`].
    pub fn behind_transaction_pooler(mut self, direct: DatabaseConnection) -> Self {
        self.direct = Some(direct.get_postgres_connection_pool().clone());
        let orm = self.db.orm().clone();
        let pooler = Arc::new(db::Pooler::default());
        self.reads = Arc::new(lane::ReadLane::new(
            orm.get_postgres_connection_pool().clone(),
            Some(pooler.clone()),
        ));
        self.db = db::Db::behind_pooler(orm, pooler);
        self
    }

    /// This store with whole snapshot diffs stopped after `limit` (30 s
    /// unless set).
    pub fn with_diff_limit(mut self, limit: Duration) -> Self {
        self.diff_limit = limit;
        self
    }

    /// The pool of connections that keep a session: the direct one behind
    /// a transaction pooler, else the store's own.
    pub(crate) fn session_pool(&self) -> &sea_orm::sqlx::PgPool {
        self.direct.as_ref().unwrap_or_else(|| self.db.pool())
    }

    /// The time of a write.
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Starts the task that drops the caches (settings, resources and
    /// grants) as soon as any instance announces a change. Without it they
    /// stay correct (checked against `svc.cache_version`), reloaded a little
    /// later. Answers the task, to abort when the process stops.
    pub fn watch_caches(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(cache::watch(
            self.db.orm().clone(),
            vec![
                (
                    cache::SETTINGS_CHANNEL,
                    self.settings.clone() as Arc<dyn cache::Invalidate>,
                ),
                (
                    cache::CATALOG_CHANNEL,
                    self.catalog.clone() as Arc<dyn cache::Invalidate>,
                ),
            ],
        ))
    }

    /// Reads the shared state's current versions and heeds them.
    pub(crate) async fn read_versions(&self) -> Result<kernel::Versions, StoreError> {
        let row = self
            .db
            .fetch_optional(Statement::from_string(
                DbBackend::Postgres,
                cache::VERSIONS_SQL,
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        let versions = versions_of(&row, "")?;
        self.seen.observe(versions);
        Ok(versions)
    }

    /// The pool, for migrations and readiness checks.
    pub fn connection(&self) -> &DatabaseConnection {
        self.db.orm()
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> bool {
        self.db.orm().ping().await.is_ok()
    }

    /// What an operator watches, read in one statement: the outbox, the
    /// workflow queue and the connection pool.
    pub async fn operations(&self) -> Result<Operations, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT (SELECT count(*) FROM svc.email_outbox WHERE sent_at IS NULL) AS outbox, \
                 (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 \
                  FROM svc.email_outbox WHERE sent_at IS NULL) AS outbox_age, \
                 (SELECT count(*) FROM svc.workflow_runs WHERE status = 'RUNNING') AS running, \
                 (SELECT count(*) FROM svc.row_events) AS row_events",
                [],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("no operations row".into()))?;
        let counts = rows::row::<OperationsRow>(&row)?;
        let pool = self.db.pool();
        Ok(Operations {
            outbox_waiting: counts.outbox,
            outbox_oldest_seconds: counts.outbox_age,
            runs_running: counts.running,
            row_events_waiting: counts.row_events,
            pool_size: pool.size(),
            pool_idle: pool.num_idle(),
        })
    }
}

/// Runs a raw statement with bound values.
pub(crate) fn stmt(sql: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

impl PgStore {
    /// The first row of `sql` with `values`, run on the reads' lane: a
    /// connection kept on this thread between requests, without the pool's
    /// check of a connection given back (a round trip, and a wake-up of
    /// another thread). For the hot single statements outside the Data API
    /// (a webhook's lookup and its run's record); the statement may run
    /// again on a fresh connection when a kept one is found broken before
    /// it answered (a key taken twice is refused, never written twice).
    pub(crate) async fn lane_row(
        &self,
        sql: &str,
        values: impl IntoIterator<Item = Value>,
    ) -> Result<Option<QueryResult>, StoreError> {
        let values = sea_orm::sea_query::Values(values.into_iter().collect());
        let rows = self.reads.rows(sql, values).await?;
        Ok(rows.into_iter().next().map(QueryResult::from))
    }
}

/// Whether `sql` (a `SELECT 1 ...`) finds a row.
pub(crate) async fn exists(
    conn: &impl ConnectionTrait,
    sql: &str,
    values: impl IntoIterator<Item = Value>,
) -> Result<bool, StoreError> {
    Ok(conn.fetch_optional(stmt(sql, values)).await?.is_some())
}

/// Runs `sql`; answers how many rows it changed.
pub(crate) async fn execute(
    conn: &impl ConnectionTrait,
    sql: &str,
    values: impl IntoIterator<Item = Value>,
) -> Result<u64, StoreError> {
    Ok(conn.run(stmt(sql, values)).await?.rows_affected())
}

/// [`execute`] on the way out of a stopping process. The server's worker
/// threads have stopped by then, and a pooled connection one of them
/// opened fails before anything is sent (and is closed): the statement is
/// tried on the next connection, at most once for each the pool may hold.
pub(crate) async fn execute_when_stopping(
    db: &db::Db,
    sql: &str,
    values: Vec<Value>,
) -> Result<u64, StoreError> {
    let most = db.pool().options().get_max_connections();
    let mut failed = String::new();
    for _ in 0..=most {
        match execute(db, sql, values.clone()).await {
            Err(StoreError::Unavailable(error)) => failed = error,
            done => return done,
        }
    }
    Err(StoreError::Unavailable(failed))
}

/// Writes an audit event through `conn` (a transaction or the pool).
pub(crate) async fn write_audit(
    conn: &impl ConnectionTrait,
    event: AuditEvent,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    entity::audit_log::ActiveModel {
        id: Set(new_id()),
        at: Set(at),
        actor_type: Set(event.actor.kind.as_str().to_owned()),
        actor_id: Set(event.actor.id),
        action: Set(event.action.to_owned()),
        target: Set(event.target),
        details: Set((!event.details.is_null()).then_some(event.details)),
        ip: Set(event.ip),
    }
    .insert(conn)
    .stored()
    .await?;
    Ok(())
}

/// Writes the audit event of a change into its transaction, then commits both.
pub(crate) async fn commit_with_audit(
    txn: Txn,
    event: AuditEvent,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    write_audit(&txn, event, at).await?;
    txn.commit_txn().await
}

impl PgStore {
    /// Commits a change of resources or grants with its audit entry, then
    /// drops this instance's catalog at once (the others drop theirs on the
    /// trigger's NOTIFY).
    pub(crate) async fn commit_catalog_change(
        &self,
        txn: Txn,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        commit_with_audit(txn, event, self.now()).await?;
        self.catalog.clear();
        Ok(())
    }
}

/// Adds memberships, keeping those that exist already.
pub(crate) async fn add_memberships(
    conn: &impl ConnectionTrait,
    user_id: Uuid,
    role_ids: &[Uuid],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    if role_ids.is_empty() {
        return Ok(());
    }
    let rows = role_ids
        .iter()
        .map(|&role_id| entity::role_member::ActiveModel {
            user_id: Set(user_id),
            role_id: Set(role_id),
            created_at: Set(now),
        });
    entity::role_member::Entity::insert_many(rows)
        .on_conflict(
            OnConflict::columns([
                entity::role_member::Column::UserId,
                entity::role_member::Column::RoleId,
            ])
            .do_nothing()
            .to_owned(),
        )
        .exec_without_returning(conn)
        .stored()
        .await?;
    Ok(())
}

/// The operations gauges' counts, in one row.
#[derive(sea_orm::FromQueryResult)]
struct OperationsRow {
    outbox: i64,
    outbox_age: f64,
    running: i64,
    row_events: i64,
}

/// Fails with a conflict when no active member of Administrators would remain.
pub(crate) async fn ensure_admin_remains(conn: &impl ConnectionTrait) -> Result<(), StoreError> {
    let sql = "SELECT EXISTS (SELECT 1 FROM svc.role_members m JOIN svc.users u ON u.id = m.user_id \
               WHERE m.role_id = $1 AND u.active) AS ok";
    let row = conn
        .fetch_optional(stmt(sql, [kernel::ADMINISTRATORS_ROLE_ID.into()]))
        .await?;
    let ok: bool = row
        .map(|r| rows::column(&r, "ok"))
        .transpose()?
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(StoreError::Conflict {
            field: None,
            message: "the last active administrator cannot be removed or deactivated".into(),
        })
    }
}

/// Whether `user_id` is an active administrator right now.
pub(crate) async fn is_active_admin(
    conn: &impl ConnectionTrait,
    user_id: Uuid,
) -> Result<bool, StoreError> {
    let sql = "SELECT EXISTS (SELECT 1 FROM svc.role_members m JOIN svc.users u ON u.id = m.user_id \
               WHERE m.role_id = $1 AND u.id = $2 AND u.active) AS ok";
    let row = conn
        .fetch_optional(stmt(
            sql,
            [kernel::ADMINISTRATORS_ROLE_ID.into(), user_id.into()],
        ))
        .await?;
    Ok(row
        .map(|r| rows::column(&r, "ok"))
        .transpose()?
        .unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::loopback_without_tls;

    #[test]
    fn loopback_urls_skip_tls_unless_told() {
        assert_eq!(
            loopback_without_tls("postgres://postgres@127.0.0.1:5432/db"),
            "postgres://postgres@127.0.0.1:5432/db?sslmode=disable"
        );
        assert_eq!(
            loopback_without_tls("postgres://u@localhost/db?application_name=x"),
            "postgres://u@localhost/db?application_name=x&sslmode=disable"
        );
        assert_eq!(
            loopback_without_tls("postgres://u@[::1]/db"),
            "postgres://u@[::1]/db?sslmode=disable"
        );
        for kept in [
            "postgres://u@127.0.0.1/db?sslmode=require",
            "postgres://u@db.example.com/db",
            "postgres://u@10.0.0.5/db",
            "not a url",
        ] {
            assert_eq!(loopback_without_tls(kept), kept);
        }
    }
}
