//! A CSV import's transaction: its rows staged with one `COPY … FROM
//! STDIN` for the whole import into a temporary table of text columns
//! (the driver's `COPY` stalls on its socket's missing `TCP_NODELAY` once
//! per `COPY`, so once per import), then inserted from there by the
//! import's guarded writes ([`data::Change::InsertStaged`]).

use async_trait::async_trait;
use data::{Context, ImportTransaction, Table, Write};
use kernel::StoreError;
use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::{self, Postgres};
use sea_query_sqlx::SqlxValues;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::write::write_sql;
use crate::PgStore;
use crate::errors::map_sqlx;

/// The staged rows' temporary table, dropped with the transaction.
pub(super) const STAGED: &str = "tessera:staged";

/// Batches of CSV text in the stream to the `COPY` at once, at most.
const IN_FLIGHT: usize = 4;

/// The staged table's column holding field `i` of a row.
pub(super) fn staged_column(i: usize) -> String {
    format!("\"c{i}\"")
}

/// A running `COPY` of the staged rows: what feeds it, and the task that
/// holds the import's connection while it runs.
struct Copying {
    rows: mpsc::Sender<Vec<u8>>,
    task: JoinHandle<(PoolConnection<Postgres>, Result<(), sqlx::Error>)>,
}

/// [`ImportTransaction`] on one connection of the pool, closed when the
/// import ends (it never goes back to the pool mid-transaction).
pub(super) struct PgImport {
    store: PgStore,
    /// The connection, in the import's transaction; `None` while a `COPY`
    /// holds it.
    connection: Option<PoolConnection<Postgres>>,
    copying: Option<Copying>,
    /// Whether the staged rows are indexed by line (after their `COPY`).
    indexed: bool,
}

impl PgStore {
    /// Opens an import's transaction with its staged table of `columns`
    /// text fields and the line of each row.
    pub(super) async fn open_import(&self, columns: usize) -> Result<PgImport, StoreError> {
        let mut connection = self
            .db
            .get_postgres_connection_pool()
            .acquire()
            .await
            .map_err(map_sqlx)?;
        connection.close_on_drop();
        let fields: String = (0..columns)
            .map(|i| format!(", {} text", staged_column(i)))
            .collect();
        // A client that stops sending does not hold the connection and its
        // locks for longer than a minute.
        let open = format!(
            "BEGIN; SET LOCAL idle_in_transaction_session_timeout = '60s'; \
             CREATE TEMPORARY TABLE \"{STAGED}\" (line bigint{fields}) ON COMMIT DROP"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(open))
            .execute(&mut *connection)
            .await
            .map_err(map_sqlx)?;
        Ok(PgImport {
            store: self.clone(),
            connection: Some(connection),
            copying: None,
            indexed: false,
        })
    }
}

impl PgImport {
    /// The connection, once the running `COPY` (if any) has ended.
    async fn connection(&mut self) -> Result<&mut PoolConnection<Postgres>, StoreError> {
        if let Some(Copying { rows, task }) = self.copying.take() {
            drop(rows);
            let (connection, copied) = task
                .await
                .map_err(|_| StoreError::Internal("an import's COPY stopped".into()))?;
            self.connection = Some(connection);
            copied.map_err(map_sqlx)?;
        }
        self.connection
            .as_mut()
            .ok_or_else(|| StoreError::Internal("an import lost its connection".into()))
    }

    /// The stream to the running `COPY`, started when none is.
    fn copy(&mut self) -> Result<&mpsc::Sender<Vec<u8>>, StoreError> {
        if self.copying.is_none() {
            let connection = self
                .connection
                .take()
                .ok_or_else(|| StoreError::Internal("an import lost its connection".into()))?;
            let (rows, batches) = mpsc::channel(IN_FLIGHT);
            self.copying = Some(Copying {
                rows,
                task: tokio::spawn(copied(connection, batches)),
            });
            self.indexed = false;
        }
        self.copying
            .as_ref()
            .map(|copying| &copying.rows)
            .ok_or_else(|| StoreError::Internal("an import's COPY did not start".into()))
    }
}

/// Runs the staged rows' `COPY` on `connection` with every batch that
/// comes, until the stream ends; gives the connection back.
async fn copied(
    mut connection: PoolConnection<Postgres>,
    mut batches: mpsc::Receiver<Vec<u8>>,
) -> (PoolConnection<Postgres>, Result<(), sqlx::Error>) {
    let copied = async {
        let statement = format!("COPY pg_temp.\"{STAGED}\" FROM STDIN (FORMAT csv)");
        let mut copy = connection.copy_in_raw(&statement).await?;
        while let Some(batch) = batches.recv().await {
            copy.send(batch).await?;
        }
        copy.finish().await.map(|_| ())
    }
    .await;
    (connection, copied)
}

#[async_trait]
impl ImportTransaction for PgImport {
    async fn stage(
        &mut self,
        rows: &[Vec<Option<String>>],
        lines: &[u64],
    ) -> Result<(), StoreError> {
        let size: usize = rows.iter().flatten().flatten().map(|f| f.len() + 3).sum();
        let mut batch = Vec::with_capacity(size + rows.len() * 24);
        for (row, line) in rows.iter().zip(lines) {
            data::csv::write_field(&mut batch, true, Some(&line.to_string()));
            for field in row {
                data::csv::write_field(&mut batch, false, field.as_deref());
            }
            batch.push(b'\n');
        }
        if self.copy()?.send(batch).await.is_err() {
            // The `COPY` ended early: its error.
            self.connection().await?;
            return Err(StoreError::Internal("an import's COPY ended early".into()));
        }
        Ok(())
    }

    async fn try_write(
        &mut self,
        table: &Table,
        write: &Write<'_>,
        context: &Context,
    ) -> Result<u64, StoreError> {
        let mark = self.store.replicas.any();
        let (sql, values) = write_sql(table, write, context, mark)?;
        let index = !self.indexed;
        self.indexed = true;
        let connection = self.connection().await?;
        if index {
            // Each chunk reads its lines through this (built once, after
            // the `COPY`: cheaper than keeping a key up to date in it).
            let statement = format!("CREATE INDEX ON pg_temp.\"{STAGED}\" USING brin (line)");
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&mut **connection)
                .await
                .map_err(map_sqlx)?;
        }
        let savepoint = async |connection: &mut PoolConnection<Postgres>, sql: &'static str| {
            sqlx::raw_sql(sql)
                .execute(&mut **connection)
                .await
                .map_err(map_sqlx)
        };
        savepoint(connection, "SAVEPOINT data_import").await?;
        let written = sqlx::query_with(sqlx::AssertSqlSafe(sql), SqlxValues(values))
            .fetch_optional(&mut **connection)
            .await
            .map_err(map_sqlx);
        let written = match written {
            Ok(row) => row,
            Err(error) => {
                savepoint(connection, "ROLLBACK TO SAVEPOINT data_import").await?;
                return Err(error);
            }
        };
        savepoint(connection, "RELEASE SAVEPOINT data_import").await?;
        let count = match written {
            Some(row) => super::answered(&sea_orm::QueryResult::from(row), mark)?,
            None => None,
        };
        Ok(count.and_then(|n| n.parse().ok()).unwrap_or(0))
    }

    async fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        let connection = self.connection().await?;
        sqlx::raw_sql("COMMIT")
            .execute(&mut **connection)
            .await
            .map_err(map_sqlx)?;
        Ok(())
    }
}

impl Drop for PgImport {
    /// An import dropped unfinished stops its `COPY`; its connection is
    /// closed, which rolls the transaction back.
    fn drop(&mut self) {
        if let Some(copying) = self.copying.take() {
            copying.task.abort();
        }
    }
}
