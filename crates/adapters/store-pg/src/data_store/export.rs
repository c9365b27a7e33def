//! CSV out of the Data API: one statement selecting each column as
//! PostgreSQL's text, its rows streamed from the server as they come and
//! written as CSV in pieces through a bounded channel, so memory stays
//! bounded whatever the number of rows.

use std::sync::Arc;

use data::{Chunks, Context, ListQuery, Table, csv};
use futures_util::TryStreamExt;
use kernel::StoreError;
use sea_orm::sqlx::{self, PgPool, Row as _};

use crate::db::Pooler;
use crate::session::Session;
use sea_query_sqlx::SqlxValues;
use tokio::sync::{SemaphorePermit, mpsc, oneshot};

use super::reads::{On, Rows};
use crate::replicas::{Target, settle};
use crate::{PgStore, map_sqlx};

/// Pieces of CSV waiting for the client, at most.
const PIECES_WAITING: usize = 4;
/// Bytes of CSV gathered before a piece is sent.
const PIECE_BYTES: usize = 64 * 1024;
/// Longest wait for the client to take a piece; past it the export ends
/// and its connection goes back to the pool.
const CLIENT_STALL: std::time::Duration = std::time::Duration::from_secs(30);
/// Exports streaming at once on this instance, each on a connection of its
/// own; one more is refused (503) rather than queued.
static EXPORTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

impl PgStore {
    /// Streams the rows of `query` as CSV (see [`data::DataStore::export`]).
    pub(super) async fn export_csv(
        &self,
        table: &Table,
        query: &ListQuery<'_>,
        all: bool,
        context: &Context,
    ) -> Result<Chunks, StoreError> {
        let permit = EXPORTS
            .try_acquire()
            .map_err(|_| StoreError::Unavailable("too many exports at once".into()))?;
        let permit = Arc::new(permit);
        // A whole table streams for long: on a replica, replay could cancel
        // it after its first rows, when the primary can no longer answer.
        let target = match all {
            true => Target::Primary,
            false => self.read_target(context).await?,
        };
        if let Target::Replica(replica, xids) = target {
            let statement =
                Rows::of_list(query).text_sql(table, context, all, On::Replica(xids.as_deref()));
            let pool = replica.lane().pool().clone();
            if let Some(answer) = settle(
                &replica,
                stream((pool, self.db.pooler()), statement, query, permit.clone()).await,
            ) {
                return answer;
            }
        }
        self.on_primary();
        let statement = Rows::of_list(query).text_sql(table, context, all, On::Primary);
        stream(
            (self.reads.pool().clone(), self.db.pooler()),
            statement,
            query,
            permit,
        )
        .await
    }
}

/// Streams the rows of the statement `(sql, values)` on a connection of
/// `pool` as CSV (in a transaction behind a pooler), once its first row
/// (or its end) has come.
async fn stream(
    (pool, pooler): (PgPool, Option<Arc<Pooler>>),
    (sql, values): (String, sea_orm::sea_query::Values),
    query: &ListQuery<'_>,
    permit: Arc<SemaphorePermit<'static>>,
) -> Result<Chunks, StoreError> {
    let mut header = Vec::new();
    for (i, output) in query.select.iter().enumerate() {
        csv::write_field(&mut header, i == 0, Some(&output.column.name));
    }
    csv::end_record(&mut header);
    let columns = query.select.len();
    let (pieces, chunks) = mpsc::channel(PIECES_WAITING);
    let (started, start) = oneshot::channel();
    tokio::spawn(async move {
        let _permit = permit;
        let mut connection = match Session::acquire(&pool, pooler.as_deref()).await {
            Ok(connection) => connection,
            Err(e) => {
                let _ = started.send(Err(map_sqlx(e)));
                return;
            }
        };
        let persistent = connection.persistent();
        let mut rows = sqlx::query_with(sqlx::AssertSqlSafe(sql), SqlxValues(values))
            .persistent(persistent)
            .fetch(&mut *connection);
        // The first row, or the end, decides the answer's status.
        let mut next = rows.try_next().await;
        match &next {
            Err(_) => {
                if let Err(e) = next {
                    let _ = started.send(Err(map_sqlx(e)));
                }
                return;
            }
            Ok(_) => {
                if started.send(Ok(())).is_err() {
                    return;
                }
            }
        }
        let mut piece = header;
        loop {
            match next {
                Ok(Some(row)) => {
                    for i in 0..columns {
                        let field: Option<&str> = match row.try_get(i) {
                            Ok(field) => field,
                            Err(e) => {
                                let _ = pieces.send(Err(map_sqlx(e))).await;
                                return;
                            }
                        };
                        csv::write_field(&mut piece, i == 0, field);
                    }
                    csv::end_record(&mut piece);
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = pieces.send(Err(map_sqlx(e))).await;
                    return;
                }
            }
            if piece.len() >= PIECE_BYTES {
                let full = std::mem::replace(&mut piece, Vec::with_capacity(PIECE_BYTES + 1024));
                // The client went away or stopped reading: the statement
                // ends with the stream.
                match tokio::time::timeout(CLIENT_STALL, pieces.send(Ok(full))).await {
                    Ok(Ok(())) => {}
                    _ => return,
                }
            }
            next = rows.try_next().await;
        }
        drop(rows);
        if let Err(e) = connection.finish().await {
            let _ = pieces.send(Err(map_sqlx(e))).await;
            return;
        }
        if !piece.is_empty() {
            let _ = pieces.send(Ok(piece)).await;
        }
    });
    start
        .await
        .map_err(|_| StoreError::Internal("the export ended before it started".into()))??;
    Ok(chunks)
}
