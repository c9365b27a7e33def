//! A transaction behind the pooler: its connection, its savepoints, and
//! the rollback of those dropped unfinished.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sea_orm::DbErr;
use sea_orm::sqlx::postgres::PgConnection;
use sea_orm::sqlx::{self, Postgres};
use tokio::sync::{Mutex, MutexGuard};

use super::{execute_simple, sqlx_error_to_exec_err};

/// A transaction (level 0) or savepoint (level 1 and up) on a
/// connection behind the pooler, rolled back when dropped unfinished.
pub(crate) struct Pooled {
    shared: Arc<Shared>,
    level: usize,
    open: bool,
}

/// A pooled transaction: its connection and savepoints, and the savepoints
/// dropped unfinished.
struct Shared {
    state: Mutex<State>,
    /// The lowest savepoint level dropped unfinished ([`NONE_DROPPED`]
    /// when none): rolled back before the transaction's next statement,
    /// with every savepoint inside it. Beside the lock, so a drop never
    /// waits for a statement in flight.
    dropped: AtomicUsize,
}

/// [`Shared::dropped`] when no savepoint waits for its rollback.
const NONE_DROPPED: usize = usize::MAX;

/// A pooled transaction's connection and how many savepoints are open.
struct State {
    /// The driver's transaction (rolled back by the driver when dropped
    /// uncommitted); `None` once ended.
    txn: Option<sqlx::Transaction<'static, Postgres>>,
    savepoints: usize,
}

/// A pooled transaction, locked for one statement.
pub(super) struct Locked<'a> {
    state: MutexGuard<'a, State>,
    dropped: &'a AtomicUsize,
}

impl Shared {
    async fn lock(&self) -> Locked<'_> {
        Locked {
            state: self.state.lock().await,
            dropped: &self.dropped,
        }
    }
}

impl Locked<'_> {
    /// The connection, after rolling back any savepoint dropped unfinished.
    pub(super) async fn connection(&mut self) -> Result<&mut PgConnection, DbErr> {
        let state = &mut *self.state;
        let txn = state
            .txn
            .as_mut()
            .ok_or_else(|| DbErr::Custom("the transaction has ended".into()))?;
        let dropped = self.dropped.swap(NONE_DROPPED, Ordering::AcqRel);
        if dropped <= state.savepoints {
            state.savepoints = dropped - 1;
            execute_simple(txn, undo_savepoint(dropped)).await?;
        }
        Ok(txn)
    }
}

/// A savepoint's name.
fn savepoint(level: usize) -> String {
    format!("tessera_savepoint_{level}")
}

/// What undoes savepoint `level` (and every one inside it) and closes it.
fn undo_savepoint(level: usize) -> String {
    let name = savepoint(level);
    format!("ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // A transaction's driver rolls it back itself, with the
        // connection's next exchange (the pool's check when it is given
        // back); a savepoint's rollback goes before the next statement.
        if self.open && self.level > 0 {
            self.shared.dropped.fetch_min(self.level, Ordering::AcqRel);
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
                    savepoints: 0,
                }),
                dropped: AtomicUsize::new(NONE_DROPPED),
            }),
            level: 0,
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
        shared.connection().await?;
        let level = shared.state.savepoints + 1;
        let sql = format!("SAVEPOINT {}", savepoint(level));
        execute_simple(shared.connection().await?, sql).await?;
        shared.state.savepoints = level;
        Ok(Pooled {
            shared: self.shared.clone(),
            level,
            open: true,
        })
    }

    /// Ends a pooled transaction or savepoint: committed, or rolled back.
    pub(super) async fn end(mut self, commit: bool) -> Result<(), DbErr> {
        self.open = false;
        let mut shared = self.shared.lock().await;
        if self.level > 0 {
            shared.connection().await?;
            // Rolled back already with an enclosing savepoint dropped first.
            if self.level > shared.state.savepoints {
                return match commit {
                    true => Err(DbErr::Custom(
                        "the savepoint was rolled back with an enclosing one".into(),
                    )),
                    false => Ok(()),
                };
            }
            let sql = match commit {
                true => format!("RELEASE SAVEPOINT {}", savepoint(self.level)),
                false => undo_savepoint(self.level),
            };
            execute_simple(shared.connection().await?, sql).await?;
            shared.state.savepoints = self.level - 1;
            return Ok(());
        }
        // A dropped savepoint's rollback goes before the commit (its work
        // is undone); a rollback undoes everything anyway.
        match commit {
            true => {
                shared.connection().await?;
            }
            false => {
                shared.dropped.store(NONE_DROPPED, Ordering::Release);
            }
        }
        let txn = shared
            .state
            .txn
            .take()
            .ok_or_else(|| DbErr::Custom("the transaction has ended".into()))?;
        match commit {
            true => txn.commit().await,
            false => txn.rollback().await,
        }
        .map_err(sqlx_error_to_exec_err)
    }
}
