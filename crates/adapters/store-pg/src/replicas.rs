//! Streaming replicas that serve reads (`TESSERA_DATABASE_READ_URLS`).
//!
//! A caller's read goes to a replica only when it answers what the primary
//! would, for that caller:
//! - no stale permission: one small statement on the primary reads the
//!   shared state's versions, and the read runs only when they are the ones
//!   the request was planned on; the replica's statement checks that it
//!   holds those same versions (else `TS412`, and the primary answers);
//! - read-your-writes: the same statement reads the transactions of the
//!   user's recent writes (`svc.write_marks`, noted by each write while
//!   replicas serve) and the replica's statement checks each is visible in
//!   its snapshot; a token sent back ([`data::consistency`]) adds its
//!   transaction.
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

use data::Context;
use kernel::StoreError;
use sea_orm::sqlx::{self, Connection as _, PgConnection, PgPool};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::lane::ReadLane;
use crate::timeout::StatementTimeout;
use crate::{PgStore, map_err, stmt, versions_of};

/// How often the watcher samples the WAL positions.
const TICK: Duration = Duration::from_millis(100);
/// The longest a replica's sample may take before it counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Samples of the primary kept (a minute of them, at most): a replica
/// behind every one serves nothing.
const SAMPLES: usize = 600;
/// How often old write marks are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The versions, then the user's recent writes: the largest WAL position
/// noted and every transaction, as `{1,2}`.
const PRIMARY_CHECK: &str = "SELECT v.auth, v.catalog, v.settings, \
     (SELECT (max(m.lsn) - '0/0'::pg_lsn)::bigint FROM svc.write_marks m WHERE m.user_id = $1) AS mark_lsn, \
     (SELECT array_agg(m.xid)::text FROM svc.write_marks m WHERE m.user_id = $1) AS mark_xids \
     FROM svc.cache_version v";

/// One replica: its pool, the reads' lane on it and what the watcher saw.
pub(crate) struct Replica {
    /// `host:port`, for metrics and logs (no credentials).
    name: String,
    db: DatabaseConnection,
    lane: ReadLane,
    timeout: Arc<StatementTimeout>,
    /// Replayed WAL position at the last sample.
    replay: AtomicU64,
    /// How far behind the primary it was at the last sample.
    lag_ms: AtomicU64,
    up: AtomicBool,
}

impl Replica {
    /// The replica's pool (sea-orm), for reads with their JSON built by PostgreSQL.
    pub(crate) fn db(&self) -> &DatabaseConnection {
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
            StoreError::QueryTimeout => None,
            StoreError::Stale => Some("behind"),
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
    /// has replayed (so a replica is never thought closer than it is): a
    /// replica behind every sample, or that is not a standby of the
    /// primary's cluster with its time zone and date style, serves nothing.
    async fn sample(&self, primary: &Samples) {
        let probed = tokio::time::timeout(
            PROBE_TIMEOUT,
            probe(self.db.get_postgres_connection_pool(), REPLICA_PROBE),
        )
        .await;
        let why_not = match &probed {
            Ok(Ok((Some(_), identity))) if Some(identity) == primary.identity.as_ref() => None,
            Ok(Ok((Some(_), _))) => {
                Some("not a standby of the primary's cluster, or its TimeZone or DateStyle differs")
            }
            Ok(Ok((None, _))) => Some("not a standby"),
            _ => Some("unreachable"),
        };
        let replayed = match (why_not, probed) {
            (None, Ok(Ok((Some(lsn), _)))) => lsn,
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

    /// Whether it serves reads at a lag of at most `max_lag_ms`.
    fn usable(&self, max_lag_ms: u64) -> bool {
        self.up.load(Ordering::Acquire) && self.lag_ms.load(Ordering::Acquire) <= max_lag_ms
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

/// Where a read runs.
pub(crate) enum Target {
    Primary,
    /// A replica, with the transactions its snapshot must show (`{1,2}`).
    Replica(Arc<Replica>, Option<String>),
}

/// Counts a read served by `target` (`primary` or a replica's name).
pub(crate) fn served(target: &Target) {
    let name = match target {
        Target::Primary => "primary".to_owned(),
        Target::Replica(replica, _) => replica.name.clone(),
    };
    metrics::counter!("tessera_database_reads_total", "target" => name).increment(1);
}

/// Counts a read that could have gone to a replica and went to the primary.
pub(crate) fn fell_back(reason: &'static str) {
    metrics::counter!("tessera_replica_fallbacks_total", "reason" => reason).increment(1);
}

impl PgStore {
    /// This store with reads served by `replicas` (each its `host:port` and
    /// pool) as far as they are current; see [`PgStore::watch_replicas`].
    #[must_use]
    pub fn with_replicas(mut self, replicas: Vec<(String, DatabaseConnection)>) -> Self {
        self.replicas = Arc::new(Replicas {
            list: replicas
                .into_iter()
                .map(|(name, db)| {
                    Arc::new(Replica {
                        name,
                        lane: ReadLane::new(db.get_postgres_connection_pool().clone()),
                        db,
                        timeout: StatementTimeout::new(),
                        replay: AtomicU64::new(0),
                        lag_ms: AtomicU64::new(u64::MAX),
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
        let primary = self.db.get_postgres_connection_pool().clone();
        tokio::spawn(sweep_marks(primary.clone()));
        let replicas = self.replicas.clone();
        tokio::spawn(async move {
            // A connection of its own: a pool busy with requests must not
            // hold back the samples (the replicas would look behind).
            let mut connection: Option<PgConnection> = None;
            let mut samples = Samples::default();
            let mut ticks = tokio::time::interval(TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                if connection.is_none() {
                    connection = tokio::time::timeout(
                        PROBE_TIMEOUT,
                        PgConnection::connect_with(primary.connect_options().as_ref()),
                    )
                    .await
                    .ok()
                    .and_then(Result::ok);
                }
                if let Some(open) = connection.as_mut() {
                    match tokio::time::timeout(PROBE_TIMEOUT, probe(&mut *open, PRIMARY_PROBE))
                        .await
                    {
                        Ok(Ok((Some(lsn), identity))) => samples.take(lsn, identity),
                        _ => connection = None,
                    }
                }
                futures_util::future::join_all(replicas.list.iter().map(|r| r.sample(&samples)))
                    .await;
            }
        });
    }

    /// Where a read planned on `context` goes: a replica when one is
    /// current enough for the caller, else the primary. Reads the primary's
    /// versions and the user's write marks in one statement when a replica
    /// could serve; [`StoreError::Stale`] when the versions moved on.
    pub(crate) async fn read_target(&self, context: &Context) -> Result<Target, StoreError> {
        self.read_target_after(context, Vec::new()).await
    }

    /// [`PgStore::read_target`] for a read that must also see the
    /// transactions `xids` (realtime events' rows).
    pub(crate) async fn read_target_after(
        &self,
        context: &Context,
        mut xids: Vec<String>,
    ) -> Result<Target, StoreError> {
        if !self.replicas.any() {
            return Ok(Target::Primary);
        }
        let max_lag_ms = self.versioned_settings().await?.0.data_replica_max_lag_ms();
        if !self.replicas.list.iter().any(|r| r.usable(max_lag_ms)) {
            fell_back("lag");
            return Ok(Target::Primary);
        }
        let row = self
            .db
            .query_one_raw(stmt(PRIMARY_CHECK, [context.user_id.into()]))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        let versions = versions_of(&row, "")?;
        self.seen.observe(versions);
        if versions != context.versions {
            return Err(StoreError::Stale);
        }
        let mark_lsn: Option<i64> = crate::rows::column(&row, "mark_lsn")?;
        let mut lsn = mark_lsn.and_then(|l| u64::try_from(l).ok()).unwrap_or(0);
        if let Some(list) = crate::rows::column::<Option<String>>(&row, "mark_xids")? {
            xids.extend(
                list.trim_matches(['{', '}'])
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(str::to_owned),
            );
        }
        if let Some(token) = data::consistency::sent() {
            lsn = lsn.max(token.lsn);
            xids.push(token.xid.to_string());
        }
        match self.replicas.pick(lsn, max_lag_ms) {
            Some(replica) => Ok(Target::Replica(
                replica,
                (!xids.is_empty()).then(|| format!("{{{}}}", xids.join(","))),
            )),
            None => {
                fell_back("behind");
                Ok(Target::Primary)
            }
        }
    }
}

/// The primary's WAL position, with what a replica must share with it:
/// its cluster's identifier, `TimeZone` and `DateStyle` (answers are
/// written with them).
const PRIMARY_PROBE: &str = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, \
     (SELECT system_identifier FROM pg_control_system())::text \
     || ' ' || current_setting('TimeZone') || ' ' || current_setting('DateStyle')";
/// A standby's replayed WAL position (null unless in recovery), with the
/// same identity as [`PRIMARY_PROBE`].
const REPLICA_PROBE: &str = "SELECT CASE WHEN pg_is_in_recovery() \
     THEN (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint END, \
     (SELECT system_identifier FROM pg_control_system())::text \
     || ' ' || current_setting('TimeZone') || ' ' || current_setting('DateStyle')";

/// The primary's WAL positions at the last ticks, and its identity.
#[derive(Default)]
struct Samples {
    taken: VecDeque<(Instant, u64)>,
    identity: Option<String>,
}

impl Samples {
    /// Notes the primary at `lsn` now (a position already noted is moved
    /// to now: the replica that has it is current as of this tick).
    fn take(&mut self, lsn: u64, identity: String) {
        match self.taken.back_mut() {
            Some((at, last)) if *last == lsn => *at = Instant::now(),
            _ => self.taken.push_back((Instant::now(), lsn)),
        }
        if self.taken.len() > SAMPLES {
            self.taken.pop_front();
        }
        self.identity = Some(identity);
    }
}

/// A server's WAL position (or null) and identity, as `sql` answers them.
async fn probe<'c, E>(executor: E, sql: &'static str) -> Result<(Option<u64>, String), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Postgres>,
{
    let (lsn, identity): (Option<i64>, String) = sqlx::query_as(sql).fetch_one(executor).await?;
    Ok((lsn.and_then(|lsn| u64::try_from(lsn).ok()), identity))
}

/// Deletes write marks older than ten minutes, a thousand at a time, every
/// minute; rows another transaction holds are left for the next round.
async fn sweep_marks(primary: PgPool) {
    let mut rounds = tokio::time::interval(SWEEP_EVERY);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        rounds.tick().await;
        let swept = sqlx::query(
            "DELETE FROM svc.write_marks WHERE (user_id, backend) IN \
             (SELECT user_id, backend FROM svc.write_marks \
              WHERE at < now() - interval '10 minutes' LIMIT 1000 FOR UPDATE SKIP LOCKED)",
        )
        .execute(&primary)
        .await;
        if let Err(error) = swept {
            tracing::warn!(%error, "sweeping write marks");
        }
    }
}
