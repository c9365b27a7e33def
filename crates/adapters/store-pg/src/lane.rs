//! Connections the Data API's reads keep between requests (and the other
//! hot single statements: a replica read's check on the primary, a
//! webhook's lookup and its pure run's record).
//!
//! The driver's pool checks every connection given back to it with a round
//! trip of its own (an empty `Sync`, answered by `ReadyForQuery`): on the
//! list route that second exchange cost PostgreSQL and the server about a
//! fifth of the request. Reads keep up to half the pool's connections aside
//! and reuse them without it. A connection goes back to the pool (and is
//! checked there) when its read failed or was cancelled mid-way, or, at the
//! next read, when it sat unused for [`IDLE`]; a read on a kept connection
//! found broken runs
//! again on one from the pool. The other half of the pool stays for
//! everything else.
//!
//! A kept connection goes back first to the thread that took it from the
//! pool: its socket is driven by the runtime it was opened on (usually
//! that HTTP worker's, when the pool opened it for that worker's read), so
//! a read on another worker would be woken through a second thread. A
//! thread with none of its own takes another's rather than wait for the
//! pool.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use kernel::StoreError;
use sea_orm::sea_query::Values;
use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::postgres::{PgConnection, PgPool, PgRow};
use sea_orm::sqlx::{self, Postgres};
use sea_query_sqlx::SqlxValues;

use crate::db::Pooler;
use crate::errors::map_sqlx;

/// How long a kept connection may sit unused before it is given back.
const IDLE: Duration = Duration::from_secs(30);

/// Reads' own connections, taken from and bounded by the pool.
#[derive(Debug)]
pub(crate) struct ReadLane {
    pool: PgPool,
    /// Behind a transaction-mode pooler: each read in a transaction.
    pooler: Option<Arc<Pooler>>,
    kept: Mutex<Vec<Kept<PoolConnection<Postgres>>>>,
    most: usize,
}

/// A connection kept for the next read.
#[derive(Debug)]
struct Kept<C> {
    connection: C,
    /// When it was last used.
    since: Instant,
    /// The statement timeout's generation it was acquired from the pool at.
    generation: u64,
    /// The thread that took it from the pool, which takes it again first.
    home: ThreadId,
}

impl ReadLane {
    /// A lane over `pool`, keeping at most half its connections; each
    /// read in a transaction of its own behind a `pooler`.
    pub(crate) fn new(pool: PgPool, pooler: Option<Arc<Pooler>>) -> Self {
        let most = usize::try_from(pool.options().get_max_connections() / 2).unwrap_or(0);
        Self {
            pool,
            pooler,
            kept: Mutex::new(Vec::with_capacity(most)),
            most,
        }
    }

    /// The pool the lane takes its connections from.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The rows of `sql` with `values` bound, all of them.
    pub(crate) async fn rows(&self, sql: &str, values: Values) -> Result<Vec<PgRow>, StoreError> {
        let mut rows = Vec::new();
        self.each(sql, values, &mut |row| {
            rows.push(row);
            Ok(())
        })
        .await?;
        Ok(rows)
    }

    /// Hands each row of `sql` with `values` bound to `visit` as it
    /// arrives, and answers how many there were; an error of `visit` ends
    /// the read at once (the rest of the rows are never read: the
    /// connection is closed). A kept connection found broken (the server
    /// restarted, or ended the session) before its first row is given up
    /// and the read, which changes nothing, runs again on one from the pool.
    pub(crate) async fn each(
        &self,
        sql: &str,
        values: Values,
        visit: &mut impl FnMut(PgRow) -> Result<(), StoreError>,
    ) -> Result<usize, StoreError> {
        let home = std::thread::current().id();
        if let Some((connection, generation)) = self.take(home) {
            match self
                .run((connection, generation, home), sql, values.clone(), visit)
                .await
            {
                Err(Stop::Driver(error, 0)) if !matches!(error, sqlx::Error::Database(_)) => {}
                done => return done.map_err(Stop::into_store),
            }
        }
        let generation = crate::timeout::generation();
        let connection = self.pool.acquire().await.map_err(map_sqlx)?;
        self.run((connection, generation, home), sql, values, visit)
            .await
            .map_err(Stop::into_store)
    }

    async fn run(
        &self,
        (mut connection, generation, home): (PoolConnection<Postgres>, u64, ThreadId),
        sql: &str,
        values: Values,
        visit: &mut impl FnMut(PgRow) -> Result<(), StoreError>,
    ) -> Result<usize, Stop> {
        // On an error or a cancelled future the connection is dropped here,
        // that is given back to the pool, which checks it (and sends the
        // rollback of a pooled read's transaction).
        let read = match &self.pooler {
            None => read(&mut connection, (sql, values, true), visit).await,
            Some(pooler) => {
                let begin = sqlx::AssertSqlSafe(pooler.begin_sql(None, None));
                let mut txn = sqlx::Connection::begin_with(&mut *connection, begin)
                    .await
                    .map_err(|error| Stop::Driver(error, 0))?;
                let read = read(&mut txn, (sql, values, false), visit).await;
                match read {
                    Ok(seen) => txn.commit().await.map(|()| seen).map_err(Stop::Commit),
                    failed => failed,
                }
            }
        };
        match read {
            Ok(seen) => {
                self.keep(Kept {
                    connection,
                    since: Instant::now(),
                    generation,
                    home,
                });
                Ok(seen)
            }
            Err(stop @ (Stop::Visit(_) | Stop::Commit(_))) => {
                // The rows left unread are not drained, a commit that
                // failed leaves the connection unknown: it goes away.
                connection.close_on_drop();
                Err(stop)
            }
            Err(stop) => Err(stop),
        }
    }

    /// The most recently used kept connection, thread `home`'s first, if
    /// one is fresh enough and carries the current statement timeout.
    fn take(&self, home: ThreadId) -> Option<(PoolConnection<Postgres>, u64)> {
        let current = crate::timeout::generation();
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        pick(&mut kept, home, current).map(|taken| (taken.connection, taken.generation))
    }

    /// Keeps a connection for the next read, or gives it back when enough are kept.
    fn keep(&self, connection: Kept<PoolConnection<Postgres>>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < self.most {
            kept.push(connection);
        }
    }
}

/// Hands each row of `sql` with `values` bound (in a prepared statement
/// the connection keeps when `persistent`, else unnamed) to `visit`;
/// answers how many there were.
async fn read(
    connection: &mut PgConnection,
    (sql, values, persistent): (&str, Values, bool),
    visit: &mut impl FnMut(PgRow) -> Result<(), StoreError>,
) -> Result<usize, Stop> {
    let mut seen = 0;
    let mut rows = sqlx::query_with(sqlx::AssertSqlSafe(sql), SqlxValues(values))
        .persistent(persistent)
        .fetch(connection);
    loop {
        let row = match rows.try_next().await {
            Ok(Some(row)) => row,
            Ok(None) => return Ok(seen),
            Err(error) => return Err(Stop::Driver(error, seen)),
        };
        seen += 1;
        visit(row).map_err(Stop::Visit)?;
    }
}

/// Drops from `kept` what sat unused for [`IDLE`] or carries another
/// statement timeout than `generation`, then takes the most recently kept
/// of thread `home`'s, else the most recently kept of any thread's.
fn pick<C>(kept: &mut Vec<Kept<C>>, home: ThreadId, generation: u64) -> Option<Kept<C>> {
    kept.retain(|k| k.since.elapsed() < IDLE && k.generation == generation);
    let at = kept
        .iter()
        .rposition(|k| k.home == home)
        .or(kept.len().checked_sub(1))?;
    Some(kept.remove(at))
}

/// Why a read on the lane ended early.
enum Stop {
    /// The driver failed, after this many rows.
    Driver(sqlx::Error, usize),
    /// The visitor refused a row.
    Visit(StoreError),
    /// A pooled read's commit failed: it may have committed, so it never
    /// runs again (the lane carries a webhook run's record).
    Commit(sqlx::Error),
}

impl Stop {
    fn into_store(self) -> StoreError {
        match self {
            Stop::Driver(error, _) | Stop::Commit(error) => map_sqlx(error),
            Stop::Visit(error) => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(connection: u8, home: ThreadId, idle: Duration, generation: u64) -> Kept<u8> {
        Kept {
            connection,
            since: Instant::now()
                .checked_sub(idle)
                .unwrap_or_else(Instant::now),
            generation,
            home,
        }
    }

    #[test]
    fn a_thread_takes_back_its_own_freshest_connection_first() {
        let here = std::thread::current().id();
        let there = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        let fresh = Duration::ZERO;
        let mut lane = vec![
            kept(1, here, fresh, 7),
            kept(2, there, fresh, 7),
            kept(3, here, fresh, 7),
            kept(4, there, fresh, 7),
        ];
        assert_eq!(pick(&mut lane, here, 7).map(|k| k.connection), Some(3));
        assert_eq!(pick(&mut lane, there, 7).map(|k| k.connection), Some(4));
        assert_eq!(pick(&mut lane, here, 7).map(|k| k.connection), Some(1));
        // With none of its own left, a thread takes another's rather than
        // wait for the pool.
        assert_eq!(pick(&mut lane, here, 7).map(|k| k.connection), Some(2));
        assert!(pick(&mut lane, there, 7).is_none());
    }

    #[test]
    fn idle_connections_and_an_older_statement_timeout_are_given_up() {
        let here = std::thread::current().id();
        let mut lane = vec![
            kept(1, here, IDLE + Duration::from_secs(1), 7),
            kept(2, here, Duration::ZERO, 6),
        ];
        assert!(pick(&mut lane, here, 7).is_none());
        assert!(lane.is_empty());
    }
}
