//! A CSV import's transaction: its rows staged with `COPY … FROM STDIN`
//! into a temporary table of text columns, then inserted from there by
//! the import's guarded writes ([`data::Change::InsertStaged`]).
//!
//! The driver's `COPY` stalls about 40 ms at its end (its sockets lack
//! `TCP_NODELAY`: the end message waits for the server's delayed
//! acknowledgement), so rows that arrive close together share one `COPY`:
//! a `COPY` ends when the stream pauses for [`COPY_PAUSE`] or after
//! [`COPY_MOST`], and then the connection is an ordinary transaction
//! again (its idle limit applies; a client that stops sending holds
//! nothing for long). A `COPY` runs without the statement timeout, which
//! would count the time the client takes to send the body; every other
//! statement of the import keeps it.
//!
//! One task holds the import's connection and runs its commands in
//! order; the connection is closed when the import ends, never given back
//! to the pool in the middle of a transaction.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use data::{Context, ImportTransaction, Table, Write, WriteAnswer};
use kernel::StoreError;
use sea_orm::sea_query::Values;
use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::postgres::PgRow;
use sea_orm::sqlx::{self, PgConnection, Postgres};
use sea_query_sqlx::SqlxValues;
use tokio::sync::{mpsc, oneshot};

use super::write::write_sql;
use crate::PgStore;
use crate::errors::map_sqlx;

/// The staged rows' temporary table, dropped with the transaction.
pub(super) const STAGED: &str = "tessera:staged";

/// Commands waiting for the import's task, at most: staged batches of
/// 1 MiB at most each, so an import holds at most 16 MiB of rows read
/// ahead while a chunk is inserted.
const WAITING: usize = 16;
/// A `COPY` ends when no rows came for this long.
const COPY_PAUSE: Duration = Duration::from_millis(200);
/// A `COPY` ends after this long, to begin again with the next rows.
const COPY_MOST: Duration = Duration::from_secs(5);

/// The staged table's column holding field `i` of a row.
pub(super) fn staged_column(i: usize) -> String {
    format!("\"c{i}\"")
}

/// What the import's task is asked to do, in order.
enum Command {
    /// Rows as CSV records, each its line then its fields.
    Stage(Vec<u8>),
    /// One statement in a savepoint, undone when it fails; the staged
    /// rows cleared once it went in, when it wrote every one of them.
    Write {
        sql: String,
        values: Values,
        whole: bool,
        reply: oneshot::Sender<Result<Option<PgRow>, StoreError>>,
    },
    Commit(oneshot::Sender<Result<(), StoreError>>),
}

/// [`ImportTransaction`] on one connection of the pool.
pub(super) struct PgImport {
    store: PgStore,
    commands: mpsc::Sender<Command>,
}

impl PgStore {
    /// Opens an import's transaction with its staged table of `columns`
    /// text fields and the line of each row.
    pub(super) async fn open_import(&self, columns: usize) -> Result<PgImport, StoreError> {
        let mut connection = self.db.pool().acquire().await.map_err(map_sqlx)?;
        connection.close_on_drop();
        let fields: String = (0..columns)
            .map(|i| format!(", {} text", staged_column(i)))
            .collect();
        // A client that stops sending does not hold the connection and its
        // locks for longer than a minute.
        // Behind a pooler the transaction sets the statement timeout, and
        // its statements are sent unnamed.
        let pooler = self.db.pooler();
        let persistent = pooler.is_none();
        let begin = pooler.map_or_else(|| "BEGIN".to_owned(), |p| p.begin_sql(None, None));
        let open = format!(
            "{begin}; SET LOCAL idle_in_transaction_session_timeout = '60s'; \
             CREATE TEMPORARY TABLE \"{STAGED}\" (line bigint{fields}) ON COMMIT DROP"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(open))
            .execute(&mut *connection)
            .await
            .map_err(map_sqlx)?;
        let timeout: (String,) = sqlx::query_as("SELECT current_setting('statement_timeout')")
            .persistent(persistent)
            .fetch_one(&mut *connection)
            .await
            .map_err(map_sqlx)?;
        let (commands, received) = mpsc::channel(WAITING);
        tokio::spawn(serve(connection, received, (timeout.0, persistent)));
        Ok(PgImport {
            store: self.clone(),
            commands,
        })
    }
}

impl PgImport {
    async fn send(&self, command: Command) -> Result<(), StoreError> {
        self.commands
            .send(command)
            .await
            .map_err(|_| StoreError::Internal("an import's connection task ended".into()))
    }
}

/// A `COPY` of the import that failed: the first command after it answers
/// its error, later ones that it happened.
#[derive(Default)]
enum Copied {
    #[default]
    Fine,
    Failed(StoreError),
    Answered,
}

impl Copied {
    fn is_fine(&self) -> bool {
        matches!(self, Copied::Fine)
    }

    /// The error to answer, once a `COPY` failed.
    fn answer(&mut self) -> StoreError {
        match std::mem::replace(self, Copied::Answered) {
            Copied::Failed(error) => error,
            _ => StoreError::Internal("an earlier COPY of the import failed".into()),
        }
    }
}

/// Runs the import's commands on `connection` until the import is
/// dropped (the connection is then closed: the transaction rolls back).
/// After a `COPY` fails, every command answers its error. Its statements
/// are kept prepared on the connection when `persistent`.
async fn serve(
    mut connection: PoolConnection<Postgres>,
    mut commands: mpsc::Receiver<Command>,
    (timeout, persistent): (String, bool),
) {
    let mut failed = Copied::Fine;
    let mut next = commands.recv().await;
    while let Some(command) = next.take() {
        match command {
            Command::Stage(_) if !failed.is_fine() => {}
            Command::Stage(batch) => {
                let (copied, ended) = copy(
                    &mut connection,
                    batch,
                    &mut commands,
                    (&timeout, persistent),
                )
                .await;
                if let Err(error) = copied {
                    failed = Copied::Failed(error);
                }
                next = match ended {
                    Ended::Paused => None,
                    Ended::Next(command) => Some(command),
                    Ended::Gone => return,
                };
            }
            Command::Write { reply, .. } if !failed.is_fine() => {
                let _ = reply.send(Err(failed.answer()));
            }
            Command::Write {
                sql,
                values,
                whole,
                reply,
            } => {
                let _ = reply.send(write(&mut connection, (sql, values, persistent), whole).await);
            }
            Command::Commit(reply) => {
                let committed = match failed.is_fine() {
                    true => run(&mut connection, "COMMIT").await,
                    false => Err(failed.answer()),
                };
                let _ = reply.send(committed);
                return;
            }
        }
        if next.is_none() {
            next = commands.recv().await;
        }
    }
}

/// How a `COPY` ended.
enum Ended {
    /// The stream paused, or the `COPY` ran for [`COPY_MOST`].
    Paused,
    /// Another command came.
    Next(Command),
    /// The import was dropped.
    Gone,
}

/// One `COPY` of `batch` and of the batches that follow it closely.
async fn copy(
    connection: &mut PgConnection,
    batch: Vec<u8>,
    commands: &mut mpsc::Receiver<Command>,
    (timeout, persistent): (&str, bool),
) -> (Result<(), StoreError>, Ended) {
    if let Err(error) = run(connection, "SET LOCAL statement_timeout = 0").await {
        return (Err(error), Ended::Paused);
    }
    let started = Instant::now();
    let statement = format!("COPY pg_temp.\"{STAGED}\" FROM STDIN (FORMAT csv)");
    let mut copy = match connection.copy_in_raw(&statement).await {
        Ok(copy) => copy,
        Err(error) => return (Err(map_sqlx(error)), Ended::Paused),
    };
    let mut batch = batch;
    let ended = loop {
        if let Err(error) = copy.send(batch).await {
            return (Err(map_sqlx(error)), Ended::Paused);
        }
        let left = COPY_MOST.saturating_sub(started.elapsed());
        match tokio::time::timeout(COPY_PAUSE.min(left), commands.recv()).await {
            Ok(Some(Command::Stage(more))) => batch = more,
            Ok(Some(other)) => break Ended::Next(other),
            Ok(None) => return (Ok(()), Ended::Gone),
            Err(_) => break Ended::Paused,
        }
    };
    if let Err(error) = copy.finish().await {
        return (Err(map_sqlx(error)), ended);
    }
    let restored = sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(timeout)
        .persistent(persistent)
        .execute(&mut *connection)
        .await
        .map(|_| ())
        .map_err(map_sqlx);
    (restored, ended)
}

/// Runs `sql` with the simple protocol.
async fn run(connection: &mut PgConnection, sql: &'static str) -> Result<(), StoreError> {
    sqlx::raw_sql(sql)
        .execute(connection)
        .await
        .map(|_| ())
        .map_err(map_sqlx)
}

/// Runs one write of staged rows in a savepoint; when it went in and
/// wrote every staged row (`whole`), the staged rows are cleared, so that
/// the next chunk's statement reads its own rows alone (no index to keep).
async fn write(
    connection: &mut PgConnection,
    (sql, values, persistent): (String, Values, bool),
    whole: bool,
) -> Result<Option<PgRow>, StoreError> {
    run(connection, "SAVEPOINT data_import").await?;
    let written = sqlx::query_with(sqlx::AssertSqlSafe(sql), SqlxValues(values))
        .persistent(persistent)
        .fetch_optional(&mut *connection)
        .await
        .map_err(map_sqlx);
    match written {
        Ok(row) => {
            run(connection, "RELEASE SAVEPOINT data_import").await?;
            if whole {
                let clear = format!("TRUNCATE pg_temp.\"{STAGED}\"");
                sqlx::raw_sql(sqlx::AssertSqlSafe(clear))
                    .execute(&mut *connection)
                    .await
                    .map_err(map_sqlx)?;
            }
            Ok(row)
        }
        Err(error) => {
            run(connection, "ROLLBACK TO SAVEPOINT data_import").await?;
            Err(error)
        }
    }
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
        self.send(Command::Stage(batch)).await
    }

    async fn send_write(
        &mut self,
        table: &Table,
        (write, whole): (&Write<'_>, bool),
        context: &Context,
    ) -> Result<WriteAnswer, StoreError> {
        let mark = self.store.replicas.any();
        let (sql, values) = write_sql(table, write, context, mark)?;
        let (reply, answer) = oneshot::channel();
        self.send(Command::Write {
            sql,
            values,
            whole,
            reply,
        })
        .await?;
        Ok(Box::pin(async move {
            let written = answer
                .await
                .map_err(|_| StoreError::Internal("an import's connection task ended".into()))??;
            let count = match written {
                Some(row) => super::answered(&sea_orm::QueryResult::from(row), mark)?,
                None => None,
            };
            Ok(count.and_then(|n| n.parse().ok()).unwrap_or(0))
        }))
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Commit(reply)).await?;
        answer
            .await
            .map_err(|_| StoreError::Internal("an import's connection task ended".into()))?
    }
}
