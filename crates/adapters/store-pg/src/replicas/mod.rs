//! Streaming replicas that serve reads (`TESSERA_DATABASE_READ_URLS`).
//!
//! A caller's read goes to a replica only when it answers what the primary
//! would, for that caller:
//! - no stale permission: one small statement on the primary reads the
//!   shared state's versions, and the replica's answer is taken only when
//!   they are the ones the request was planned on; the replica's statement
//!   checks that it holds those same versions (else `TS412`, and the
//!   primary answers);
//! - read-your-writes: the same statement reads the transactions of the
//!   user's recent writes (`svc.write_marks`, noted by each write while
//!   replicas serve), each of which must have ended as of the replica
//!   statement's snapshot; a token sent back ([`data::consistency`]) adds
//!   its transaction, checked in the replica's statement itself.
//!
//! Data API reads and DataViews send the primary's check and the replica's
//! statement at once (the replica answering its snapshot's `xmin` beside
//! the rows, [`settle_checked`]): a replica read costs the primary that one
//! small statement and the caller one round trip. Exports and realtime
//! reads ask the primary first ([`PgStore::read_target`]).
//!
//! A watcher samples the primary's WAL position and each replica's replay
//! position every [`TICK`]: a replica that is down, not a standby, or more
//! than `data.replica_max_lag_ms` behind is skipped until it catches up.
//! A read that fails on a replica for its connection, a standby conflict
//! or a state check runs again on the primary.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kernel::StoreError;
use sea_orm::DatabaseConnection;

use crate::db::Db;
use sea_orm::sqlx::postgres::PgConnectOptions;
use sea_orm::sqlx::{self, Connection as _, PgConnection, PgPool, Row as _};

use crate::PgStore;
use crate::lane::ReadLane;

mod reads;

use crate::timeout::StatementTimeout;
pub(crate) use reads::{Target, settle, settle_checked};

/// How often the watcher samples the WAL positions.
const TICK: Duration = Duration::from_millis(100);
/// The longest a sample may take before its server counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long after a failed connection the watcher tries again.
const RECONNECT: Duration = Duration::from_secs(1);
/// Samples of the primary kept (600 distinct positions, a minute or more):
/// a replica behind every one serves nothing.
const SAMPLES: usize = 600;
/// How often old write marks are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// One replica: its pool, the reads' lane on it and what the watcher saw.
pub(crate) struct Replica {
    /// `host:port`, for metrics and logs (no credentials).
    name: String,
    db: Db,
    lane: ReadLane,
    timeout: Arc<StatementTimeout>,
    /// Replayed WAL position at the last sample.
    replay: AtomicU64,
    /// How far behind the primary it was at the last sample.
    lag_ms: AtomicU64,
    /// When that sample was taken ([`since_start_ms`]).
    sampled_ms: AtomicU64,
    up: AtomicBool,
}

impl Replica {
    /// The replica's pool (sea-orm), for reads with their JSON built by PostgreSQL.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The reads' lane on the replica.
    pub(crate) fn lane(&self) -> &ReadLane {
        &self.lane
    }

    /// Whether a read that failed on the replica runs again on the
    /// primary (the reason, for the metrics): every failure but a timeout,
    /// since the replica may not have replayed a change the read was
    /// planned on (a new column, a new type); the primary's answer, error
    /// or not, is the one given. A replica that could not be reached is
    /// skipped until the watcher sees it answer again.
    pub(crate) fn fallback_for(&self, error: &StoreError) -> Option<&'static str> {
        match error {
            StoreError::QueryTimeout | StoreError::AnswerTooLarge => None,
            StoreError::Stale => Some("stale"),
            // A read conflicts with nothing on the primary: on a standby
            // this is a query cancelled by replay.
            StoreError::Conflict { field: None, .. } => Some("conflict"),
            StoreError::Unavailable(_) => {
                self.up.store(false, Ordering::Release);
                Some("down")
            }
            _ => Some("error"),
        }
    }

    /// Takes a sample of the replay position against the primary's
    /// samples. Lag is counted from the newest primary sample the replica
    /// has replayed, timed before that sample was asked for (so a replica
    /// is never thought closer than it is): a replica behind every sample,
    /// or that is not a standby of the primary's database with its output
    /// settings, serves nothing.
    async fn sample(&self, prober: &mut Prober, primary: &Samples) {
        let probed = prober.probe(REPLICA_PROBE).await;
        let why_not = match &probed {
            Some((Some(_), identity)) if Some(identity) == primary.identity.as_ref() => None,
            Some((Some(_), _)) => Some(
                "not a standby of the primary's database, or an output setting (TimeZone, DateStyle, ...) differs",
            ),
            Some((None, _)) => Some("not a standby"),
            None => Some("unreachable"),
        };
        let replayed = match (why_not, probed) {
            (None, Some((Some(lsn), _))) => lsn,
            (why, _) => {
                if self.up.swap(false, Ordering::AcqRel) {
                    tracing::warn!(replica = %self.name, why = why.unwrap_or_default(), "no reads go to this replica");
                }
                self.lag_ms.store(u64::MAX, Ordering::Release);
                return self.gauge(false);
            }
        };
        let lag = primary
            .taken
            .iter()
            .rev()
            .find(|(_, lsn)| *lsn <= replayed)
            .map_or(u64::MAX, |(at, _)| {
                u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)
            });
        self.replay.store(replayed, Ordering::Release);
        self.lag_ms.store(lag, Ordering::Release);
        self.sampled_ms.store(since_start_ms(), Ordering::Release);
        if !self.up.swap(true, Ordering::AcqRel) {
            tracing::info!(replica = %self.name, "read replica serving");
        }
        self.gauge(true);
    }

    fn gauge(&self, up: bool) {
        let name = self.name.clone();
        metrics::gauge!("tessera_replica_up", "replica" => name.clone())
            .set(f64::from(u8::from(up)));
        let lag = self.lag_ms.load(Ordering::Acquire);
        metrics::gauge!("tessera_replica_lag_seconds", "replica" => name).set(if lag == u64::MAX {
            f64::INFINITY
        } else {
            lag as f64 / 1000.0
        });
    }

    /// Whether it serves reads at a lag of at most `max_lag_ms`, counting
    /// the time since its last sample as lag too.
    fn usable(&self, max_lag_ms: u64) -> bool {
        let since = since_start_ms().saturating_sub(self.sampled_ms.load(Ordering::Acquire));
        self.up.load(Ordering::Acquire)
            && self.lag_ms.load(Ordering::Acquire).saturating_add(since) <= max_lag_ms
    }
}

/// The replicas, taken in turn.
#[derive(Default)]
pub(crate) struct Replicas {
    list: Vec<Arc<Replica>>,
    next: AtomicUsize,
}

impl Replicas {
    /// Whether reads may go anywhere but the primary (and writes note
    /// their transactions for the reads that follow).
    pub(crate) fn any(&self) -> bool {
        !self.list.is_empty()
    }

    /// The next replica, in turn, that serves at `max_lag_ms` and has
    /// replayed up to `lsn` at its last sample.
    fn pick(&self, lsn: u64, max_lag_ms: u64) -> Option<Arc<Replica>> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..self.list.len())
            .map(|i| &self.list[(start + i) % self.list.len()])
            .find(|r| r.usable(max_lag_ms) && r.replay.load(Ordering::Acquire) >= lsn)
            .cloned()
    }

    /// Makes `ms`, read at settings version `version`, the statement
    /// timeout of every replica's new connections.
    pub(crate) fn heed_timeout(&self, version: i64, ms: u64) {
        for replica in &self.list {
            replica.timeout.heed(&replica.db, version, ms);
        }
    }
}

impl PgStore {
    /// This store with reads served by `replicas` (each its `host:port` and
    /// pool) as far as they are current; see [`PgStore::watch_replicas`].
    #[must_use]
    pub fn with_replicas(mut self, replicas: Vec<(String, DatabaseConnection)>) -> Self {
        let pooler = self.db.pooler();
        self.replicas = Arc::new(Replicas {
            list: replicas
                .into_iter()
                .map(|(name, db)| {
                    Arc::new(Replica {
                        name,
                        lane: ReadLane::new(
                            db.get_postgres_connection_pool().clone(),
                            pooler.clone(),
                        ),
                        db: match &pooler {
                            Some(pooler) => Db::behind_pooler(db, pooler.clone()),
                            None => Db::direct(db),
                        },
                        timeout: StatementTimeout::new(),
                        replay: AtomicU64::new(0),
                        lag_ms: AtomicU64::new(u64::MAX),
                        sampled_ms: AtomicU64::new(0),
                        up: AtomicBool::new(false),
                    })
                })
                .collect(),
            next: AtomicUsize::new(0),
        });
        self
    }

    /// Starts the tasks that sample the replicas' replay against the
    /// primary (none is read from before its first sample) and sweep old
    /// write marks. Does nothing without replicas.
    pub fn watch_replicas(&self) {
        if !self.replicas.any() {
            return;
        }
        let primary = self.db.pool().clone();
        tokio::spawn(sweep_marks(self.db.clone()));
        let replicas = self.replicas.clone();
        tokio::spawn(async move {
            let mut prober = Prober::new(&primary);
            let mut probers: Vec<Prober> = replicas
                .list
                .iter()
                .map(|r| Prober::new(r.db.pool()))
                .collect();
            let mut samples = Samples::default();
            let mut ticks = tokio::time::interval(TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                let asked = Instant::now();
                if let Some((Some(lsn), identity)) = prober.probe(PRIMARY_PROBE).await {
                    samples.take(asked, lsn, identity);
                }
                futures_util::future::join_all(
                    replicas
                        .list
                        .iter()
                        .zip(probers.iter_mut())
                        .map(|(replica, prober)| replica.sample(prober, &samples)),
                )
                .await;
            }
        });
    }
}

/// What a replica must share with the primary: the cluster, the database
/// and the settings answers are written with.
macro_rules! identity {
    () => {
        "(SELECT system_identifier FROM pg_control_system())::text || ' ' || current_database() \
         || ' ' || current_setting('TimeZone') || ' ' || current_setting('DateStyle') \
         || ' ' || current_setting('IntervalStyle') || ' ' || current_setting('bytea_output') \
         || ' ' || current_setting('extra_float_digits')"
    };
}

/// The primary's WAL position and identity.
const PRIMARY_PROBE: &str = concat!(
    "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, ",
    identity!()
);
/// A standby's replayed WAL position (null unless in recovery) and identity.
const REPLICA_PROBE: &str = concat!(
    "SELECT CASE WHEN pg_is_in_recovery() \
     THEN (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint END, ",
    identity!()
);

/// The primary's WAL positions at the last ticks, and its identity.
#[derive(Default)]
struct Samples {
    taken: VecDeque<(Instant, u64)>,
    identity: Option<String>,
}

impl Samples {
    /// Notes the primary at `lsn` as of `asked` (when the sample was
    /// asked for). A position already noted is moved to `asked`: the
    /// replica that has it is current as of then. A position that went
    /// back, or another identity (a new primary), starts afresh.
    fn take(&mut self, asked: Instant, lsn: u64, identity: String) {
        if self.identity.as_ref() != Some(&identity)
            || self.taken.back().is_some_and(|(_, last)| *last > lsn)
        {
            self.taken.clear();
        }
        match self.taken.back_mut() {
            Some((at, last)) if *last == lsn => *at = asked,
            _ => self.taken.push_back((asked, lsn)),
        }
        if self.taken.len() > SAMPLES {
            self.taken.pop_front();
        }
        self.identity = Some(identity);
    }
}

/// A connection of the watcher's own to one server (so that a pool busy
/// with requests does not hold back the samples), opened again at most
/// once a second after a failure.
struct Prober {
    options: Arc<PgConnectOptions>,
    connection: Option<PgConnection>,
    tried: Option<Instant>,
}

impl Prober {
    fn new(pool: &PgPool) -> Self {
        Self {
            options: pool.connect_options(),
            connection: None,
            tried: None,
        }
    }

    /// The server's WAL position (or null) and identity, as `sql` answers
    /// them, within [`PROBE_TIMEOUT`]; `None` when it does not answer.
    async fn probe(&mut self, sql: &'static str) -> Option<(Option<u64>, String)> {
        if self.connection.is_none() {
            if self.tried.is_some_and(|at| at.elapsed() < RECONNECT) {
                return None;
            }
            self.tried = Some(Instant::now());
            self.connection =
                tokio::time::timeout(PROBE_TIMEOUT, PgConnection::connect_with(&self.options))
                    .await
                    .ok()
                    .and_then(Result::ok);
        }
        let connection = self.connection.as_mut()?;
        let answered = tokio::time::timeout(PROBE_TIMEOUT, async {
            // The simple protocol: one exchange, nothing kept prepared (a
            // pooler may hand each probe to another server connection).
            let row = sqlx::raw_sql(sql).fetch_one(&mut *connection).await?;
            let (lsn, identity): (Option<i64>, String) = (row.try_get(0)?, row.try_get(1)?);
            Ok::<_, sqlx::Error>((lsn.and_then(|lsn| u64::try_from(lsn).ok()), identity))
        })
        .await;
        match answered {
            Ok(Ok(answer)) => Some(answer),
            _ => {
                self.connection = None;
                None
            }
        }
    }
}

/// Deletes write marks older than ten minutes (counted from the write's
/// last statement), a thousand at a time until none is left, every minute;
/// rows another transaction holds are left for the next round.
async fn sweep_marks(primary: Db) {
    let mut rounds = tokio::time::interval(SWEEP_EVERY);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        rounds.tick().await;
        loop {
            let swept = crate::execute(
                &primary,
                "DELETE FROM svc.write_marks WHERE (user_id, backend) IN \
                 (SELECT user_id, backend FROM svc.write_marks \
                  WHERE at < now() - interval '10 minutes' LIMIT 1000 FOR UPDATE SKIP LOCKED)",
                [],
            )
            .await;
            match swept {
                Ok(1000) => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(%error, "sweeping write marks");
                    break;
                }
            }
        }
    }
}

/// Milliseconds since the watcher's clock started (monotonic).
fn since_start_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}
