//! Connections the Data API's reads keep between requests.
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

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use kernel::StoreError;
use sea_orm::sea_query::Values;
use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::postgres::{PgPool, PgRow};
use sea_orm::sqlx::{self, Postgres};
use sea_query_sqlx::SqlxValues;

use crate::errors::map_sqlx;

/// How long a kept connection may sit unused before it is given back.
const IDLE: Duration = Duration::from_secs(30);

/// Reads' own connections, taken from and bounded by the pool.
#[derive(Debug)]
pub(crate) struct ReadLane {
    pool: PgPool,
    /// Each with when it was last used and the statement timeout's
    /// generation it was acquired from the pool at.
    kept: Mutex<Vec<(PoolConnection<Postgres>, Instant, u64)>>,
    most: usize,
}

impl ReadLane {
    /// A lane over `pool`, keeping at most half its connections.
    pub(crate) fn new(pool: PgPool) -> Self {
        let most = usize::try_from(pool.options().get_max_connections() / 2).unwrap_or(0);
        Self {
            pool,
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
        if let Some((connection, generation)) = self.take() {
            match self
                .run(connection, generation, sql, values.clone(), visit)
                .await
            {
                Err(Stop::Driver(error, 0)) if !matches!(error, sqlx::Error::Database(_)) => {}
                done => return done.map_err(Stop::into_store),
            }
        }
        let generation = crate::timeout::generation();
        let connection = self.pool.acquire().await.map_err(map_sqlx)?;
        self.run(connection, generation, sql, values, visit)
            .await
            .map_err(Stop::into_store)
    }

    async fn run(
        &self,
        mut connection: PoolConnection<Postgres>,
        generation: u64,
        sql: &str,
        values: Values,
        visit: &mut impl FnMut(PgRow) -> Result<(), StoreError>,
    ) -> Result<usize, Stop> {
        // On an error or a cancelled future the connection is dropped here,
        // that is given back to the pool, which checks it.
        let mut seen = 0;
        {
            let mut rows = sqlx::query_with(sqlx::AssertSqlSafe(sql), SqlxValues(values))
                .fetch(&mut *connection);
            loop {
                let row = match rows.try_next().await {
                    Ok(Some(row)) => row,
                    Ok(None) => break,
                    Err(error) => return Err(Stop::Driver(error, seen)),
                };
                seen += 1;
                if let Err(error) = visit(row) {
                    drop(rows);
                    // The rows left unread are not drained: the
                    // connection goes away with them.
                    connection.close_on_drop();
                    return Err(Stop::Visit(error));
                }
            }
        }
        self.keep(connection, generation);
        Ok(seen)
    }

    /// The most recently used kept connection, if one is fresh enough and
    /// carries the current statement timeout.
    fn take(&self) -> Option<(PoolConnection<Postgres>, u64)> {
        let current = crate::timeout::generation();
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|(_, since, generation)| since.elapsed() < IDLE && *generation == current);
        kept.pop()
            .map(|(connection, _, generation)| (connection, generation))
    }

    /// Keeps `connection` for the next read, or gives it back when enough are kept.
    fn keep(&self, connection: PoolConnection<Postgres>, generation: u64) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < self.most {
            kept.push((connection, Instant::now(), generation));
        }
    }
}

/// Why a read on the lane ended early.
enum Stop {
    /// The driver failed, after this many rows.
    Driver(sqlx::Error, usize),
    /// The visitor refused a row.
    Visit(StoreError),
}

impl Stop {
    fn into_store(self) -> StoreError {
        match self {
            Stop::Driver(error, _) => map_sqlx(error),
            Stop::Visit(error) => error,
        }
    }
}
