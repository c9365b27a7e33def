//! Statements and transactions that answer the store's error: the one
//! place a database error becomes a [`StoreError`] (through
//! [`map_err`](crate::errors::map_err)), so that no call site maps it.

use std::future::Future;

use crate::db::Txn;
use kernel::StoreError;
use sea_orm::{ConnectionTrait, DbErr, ExecResult, QueryResult, Statement, TransactionTrait};

use crate::errors::map_err;

/// Statements on a pool, a connection or a transaction.
pub(crate) trait Query: ConnectionTrait {
    /// The first row `statement` answers, if any.
    fn fetch_optional(
        &self,
        statement: Statement,
    ) -> impl Future<Output = Result<Option<QueryResult>, StoreError>> + Send {
        async move { self.query_one_raw(statement).await.map_err(map_err) }
    }

    /// Every row `statement` answers.
    fn fetch_all(
        &self,
        statement: Statement,
    ) -> impl Future<Output = Result<Vec<QueryResult>, StoreError>> + Send {
        async move { self.query_all_raw(statement).await.map_err(map_err) }
    }

    /// Runs `statement`; answers what it changed.
    fn run(
        &self,
        statement: Statement,
    ) -> impl Future<Output = Result<ExecResult, StoreError>> + Send {
        async move { self.execute_raw(statement).await.map_err(map_err) }
    }

    /// Runs `sql` (statements with no bound value, such as DDL built from
    /// quoted identifiers) with the simple protocol.
    fn run_unprepared(
        &self,
        sql: &str,
    ) -> impl Future<Output = Result<ExecResult, StoreError>> + Send {
        async move { self.execute_unprepared(sql).await.map_err(map_err) }
    }
}

impl<C: ConnectionTrait + ?Sized> Query for C {}

/// A transaction opened on a pool or a connection.
pub(crate) trait Begin: TransactionTrait {
    /// Opens a transaction (rolled back when dropped uncommitted).
    fn open_txn(&self) -> impl Future<Output = Result<Self::Transaction, StoreError>> + Send
    where
        Self::Transaction: Send,
    {
        async move { self.begin().await.map_err(map_err) }
    }
}

impl<T: TransactionTrait + ?Sized> Begin for T {}

/// A transaction's end.
pub(crate) trait Commit {
    /// Commits the transaction.
    fn commit_txn(self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

impl Commit for Txn {
    async fn commit_txn(self) -> Result<(), StoreError> {
        self.commit().await.map_err(map_err)
    }
}

/// A call of the ORM (an entity's `one`, `all`, `exec`, `insert` or
/// `update`, a transaction's `rollback`) that answers the store's error.
pub(crate) trait Stored<T>: Future<Output = Result<T, DbErr>> + Sized {
    /// The call, its error a [`StoreError`].
    fn stored(self) -> impl Future<Output = Result<T, StoreError>> + Send
    where
        Self: Send,
        T: Send,
    {
        async move { self.await.map_err(map_err) }
    }
}

impl<T, F: Future<Output = Result<T, DbErr>>> Stored<T> for F {}
