//! A transaction behind the pooler: its connection, its savepoints, and
//! the rollback of those dropped unfinished.
//!
//! Each savepoint has a name of its own (`tessera_savepoint_{id}`, ids
//! increasing within the transaction), so a handle only ever ends its own
//! savepoint. Its work is kept only when it is committed: a savepoint
//! dropped unfinished, or still open when an enclosing one (or the
//! transaction) ends, is rolled back first, with every savepoint inside it.

use std::sync::Arc;

use sea_orm::DbErr;
use sea_orm::sqlx::postgres::PgConnection;
use sea_orm::sqlx::{self, Postgres};
use tokio::sync::{Mutex, MutexGuard};

use super::{execute_simple, sqlx_error_to_exec_err};

/// A transaction (`id` 0) or one of its savepoints on a connection behind
/// the pooler, rolled back when dropped unfinished.
pub(crate) struct Pooled {
    shared: Arc<Shared>,
    id: u64,
    open: bool,
}

/// A pooled transaction: its connection and savepoints, and the savepoints
/// dropped unfinished.
struct Shared {
    state: Mutex<State>,
    /// Savepoints dropped unfinished, rolled back before the transaction's
    /// next statement. Beside the statement lock and held only to push or
    /// take, so a drop never waits for a statement in flight.
    dropped: std::sync::Mutex<Vec<u64>>,
}

/// A pooled transaction's connection and open savepoints.
struct State {
    /// The driver's transaction (rolled back by the driver when dropped
    /// uncommitted); `None` once ended.
    txn: Option<sqlx::Transaction<'static, Postgres>>,
    /// The open savepoints' ids, the innermost last.
    open: Vec<u64>,
    /// The last id given.
    last_id: u64,
}

/// A pooled transaction, locked for one statement.
pub(super) struct Locked<'a> {
    state: MutexGuard<'a, State>,
    dropped: &'a std::sync::Mutex<Vec<u64>>,
}

impl Shared {
    async fn lock(&self) -> Locked<'_> {
        Locked {
            state: self.state.lock().await,
            dropped: &self.dropped,
        }
    }

    /// Notes `id` for rollback before the next statement.
    fn drop_savepoint(&self, id: u64) {
        if let Ok(mut dropped) = self.dropped.lock() {
            dropped.push(id);
        }
    }
}

impl Locked<'_> {
    /// The connection, after rolling back any savepoint dropped unfinished.
    pub(super) async fn connection(&mut self) -> Result<&mut PgConnection, DbErr> {
        let dropped = std::mem::take(&mut *self.dropped.lock().map_err(|_| ended())?);
        let outermost = self.state.open.iter().position(|id| dropped.contains(id));
        if let Some(position) = outermost {
            self.undo_from(position).await?;
        }
        self.state.txn.as_deref_mut().ok_or_else(ended)
    }

    /// Rolls back and closes the open savepoint at `position` and every one
    /// inside it. Forgotten only once done: when the rollback fails or is
    /// cancelled, it is tried again before the next statement (and a commit
    /// fails rather than keep their work).
    async fn undo_from(&mut self, position: usize) -> Result<(), DbErr> {
        let id = self.state.open[position];
        let undone = Rearm {
            dropped: self.dropped,
            id,
            armed: true,
        };
        let txn = self.state.txn.as_deref_mut().ok_or_else(ended)?;
        let name = savepoint(id);
        let sql = format!("ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}");
        execute_simple(txn, sql).await?;
        undone.disarm();
        self.state.open.truncate(position);
        Ok(())
    }
}

/// Notes a savepoint for rollback again when dropped armed.
struct Rearm<'a> {
    dropped: &'a std::sync::Mutex<Vec<u64>>,
    id: u64,
    armed: bool,
}

impl Rearm<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Rearm<'_> {
    fn drop(&mut self) {
        if self.armed
            && let Ok(mut dropped) = self.dropped.lock()
        {
            dropped.push(self.id);
        }
    }
}

fn ended() -> DbErr {
    DbErr::Custom("the transaction has ended".into())
}

/// A savepoint's name.
fn savepoint(id: u64) -> String {
    format!("tessera_savepoint_{id}")
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // A transaction's driver rolls it back itself, with the
        // connection's next exchange (the pool's check when it is given
        // back); a savepoint's rollback goes before the next statement.
        if self.open && self.id > 0 {
            self.shared.drop_savepoint(self.id);
        }
    }
}

impl Pooled {
    /// The transaction `txn` began.
    pub(super) fn new(txn: sqlx::Transaction<'static, Postgres>) -> Self {
        Pooled {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    txn: Some(txn),
                    open: Vec::new(),
                    last_id: 0,
                }),
                dropped: std::sync::Mutex::new(Vec::new()),
            }),
            id: 0,
            open: true,
        }
    }

    /// The transaction, locked for one statement.
    pub(super) async fn lock(&self) -> Locked<'_> {
        self.shared.lock().await
    }

    /// A savepoint in this transaction.
    pub(super) async fn savepoint(&self) -> Result<Pooled, DbErr> {
        let mut shared = self.shared.lock().await;
        let id = shared.state.last_id + 1;
        let sql = format!("SAVEPOINT {}", savepoint(id));
        execute_simple(shared.connection().await?, sql).await?;
        shared.state.last_id = id;
        shared.state.open.push(id);
        Ok(Pooled {
            shared: self.shared.clone(),
            id,
            open: true,
        })
    }

    /// Ends a pooled transaction or savepoint: committed, or rolled back.
    /// Savepoints still open inside it are rolled back first.
    pub(super) async fn end(mut self, commit: bool) -> Result<(), DbErr> {
        let mut shared = self.shared.lock().await;
        shared.connection().await?;
        if self.id > 0 {
            let Some(position) = shared.state.open.iter().position(|&id| id == self.id) else {
                // Rolled back already, with an enclosing savepoint.
                self.open = false;
                return match commit {
                    true => Err(DbErr::Custom(
                        "the savepoint was rolled back with an enclosing one".into(),
                    )),
                    false => Ok(()),
                };
            };
            match commit {
                true => {
                    if position + 1 < shared.state.open.len() {
                        shared.undo_from(position + 1).await?;
                    }
                    let sql = format!("RELEASE SAVEPOINT {}", savepoint(self.id));
                    execute_simple(shared.connection().await?, sql).await?;
                    shared.state.open.truncate(position);
                }
                false => shared.undo_from(position).await?,
            }
            self.open = false;
            return Ok(());
        }
        if commit && !shared.state.open.is_empty() {
            shared.undo_from(0).await?;
        }
        let txn = shared.state.txn.take().ok_or_else(ended)?;
        self.open = false;
        match commit {
            true => txn.commit().await,
            false => txn.rollback().await,
        }
        .map_err(sqlx_error_to_exec_err)
    }
}
