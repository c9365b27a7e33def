//! The store's connections: the ORM's pool as it is, or, behind a
//! transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy), one that
//! leaves nothing on a server connection between transactions.
//!
//! A pooler in transaction mode lends a server connection for one
//! transaction, so nothing may outlive one: not a named prepared statement
//! (the driver names and keeps one per statement), nor an unnamed one
//! across a `Sync` outside a transaction (the driver parses in one exchange
//! and binds in the next, which the pooler may send to another server).
//! There every statement is unnamed and runs inside a transaction: a
//! transaction's statements in it, any other in one opened for it alone
//! (`BEGIN` and `COMMIT`: two round trips more, what the pooler mode
//! costs). The statement timeout, carried by the connection otherwise, is
//! set by each transaction's `BEGIN` (`SET LOCAL`).

mod pooled;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use sea_orm::sqlx::postgres::{PgConnection, PgPool};
use sea_orm::sqlx::{self, Postgres};
use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    ExecResult, IsolationLevel, QueryResult, RuntimeErr, Statement, TransactionError,
    TransactionOptions, TransactionSession, TransactionTrait, Values,
};
use sea_query_sqlx::SqlxValues;

use self::pooled::Pooled;

/// The pool every statement of the store runs on.
#[derive(Clone)]
pub(crate) struct Db {
    orm: DatabaseConnection,
    /// `None` on a direct connection.
    pooler: Option<Arc<Pooler>>,
}

/// What each transaction sets behind a transaction-mode pooler.
#[derive(Debug, Default)]
pub(crate) struct Pooler {
    /// The statement timeout, in milliseconds (0: none).
    timeout_ms: AtomicU64,
}

impl Pooler {
    /// The `BEGIN` of a transaction, with its isolation and access and
    /// the current statement timeout.
    pub(crate) fn begin_sql(
        &self,
        isolation: Option<IsolationLevel>,
        access: Option<AccessMode>,
    ) -> String {
        let mut sql = String::from("BEGIN");
        if let Some(level) = isolation {
            sql.push_str(&format!(" ISOLATION LEVEL {level}"));
        }
        if let Some(mode) = access {
            sql.push_str(&format!(" {mode}"));
        }
        let ms = self.timeout_ms.load(Ordering::Acquire);
        if ms > 0 {
            sql.push_str(&format!("; SET LOCAL statement_timeout = {ms}"));
        }
        sql
    }
}

impl Db {
    /// Statements on `orm` as the ORM sends them (a direct connection).
    pub(crate) fn direct(orm: DatabaseConnection) -> Self {
        Self { orm, pooler: None }
    }

    /// Statements on `orm` for a transaction-mode pooler.
    pub(crate) fn behind_pooler(orm: DatabaseConnection, pooler: Arc<Pooler>) -> Self {
        Self {
            orm,
            pooler: Some(pooler),
        }
    }

    /// The driver's pool under the ORM's.
    pub(crate) fn pool(&self) -> &PgPool {
        self.orm.get_postgres_connection_pool()
    }

    /// The ORM's pool, as opened.
    pub(crate) fn orm(&self) -> &DatabaseConnection {
        &self.orm
    }

    /// Makes `ms` the statement timeout each transaction sets behind a
    /// pooler; answers false on a direct connection (which carries it).
    pub(crate) fn set_pooled_timeout(&self, ms: u64) -> bool {
        match &self.pooler {
            Some(pooler) => {
                pooler.timeout_ms.store(ms, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// What each transaction sets behind the pooler; `None` on a direct
    /// connection.
    pub(crate) fn pooler(&self) -> Option<Arc<Pooler>> {
        self.pooler.clone()
    }

    /// Runs `run` on a connection of its own in a transaction opened for
    /// it alone, committed when it succeeds (the pooler mode's statement).
    async fn alone<T: Send>(
        &self,
        run: impl for<'c> FnOnce(&'c mut PgConnection) -> BoxFuture<'c, Result<T, DbErr>> + Send,
    ) -> Result<T, DbErr> {
        let mut txn = self.begin_pooled(None, None).await?;
        match run(&mut txn).await {
            Ok(answer) => {
                txn.commit().await.map_err(sqlx_error_to_exec_err)?;
                Ok(answer)
            }
            Err(error) => {
                // Rolled back before the connection goes back to the pool,
                // so that the pooler's server goes back to its own at once;
                // the statement's error is the answer.
                let _ = txn.rollback().await;
                Err(error)
            }
        }
    }

    /// A transaction on a connection of the pool, behind the pooler.
    async fn begin_pooled(
        &self,
        isolation: Option<IsolationLevel>,
        access: Option<AccessMode>,
    ) -> Result<sqlx::Transaction<'static, Postgres>, DbErr> {
        let sql = self
            .pooler
            .as_ref()
            .map(|pooler| pooler.begin_sql(isolation, access))
            .unwrap_or_default();
        self.pool()
            .begin_with(sqlx::AssertSqlSafe(sql))
            .await
            .map_err(sqlx_error_to_exec_err)
    }

    async fn open(
        &self,
        isolation: Option<IsolationLevel>,
        access: Option<AccessMode>,
    ) -> Result<Txn, DbErr> {
        if self.pooler.is_none() {
            return self
                .orm
                .begin_with_config(isolation, access)
                .await
                .map(Txn::Direct);
        }
        let txn = self.begin_pooled(isolation, access).await?;
        Ok(Txn::Pooled(Pooled::new(txn)))
    }
}

/// A driver's error as the ORM gives it, where it ran a statement.
fn sqlx_error_to_query_err(error: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(error)))
}

/// A driver's error as the ORM gives it, where it ran a change.
fn sqlx_error_to_exec_err(error: sqlx::Error) -> DbErr {
    DbErr::Exec(RuntimeErr::SqlxError(Arc::new(error)))
}

/// `statement`'s rows, sent unnamed on `connection`.
async fn rows(
    connection: &mut PgConnection,
    statement: Statement,
) -> Result<Vec<QueryResult>, DbErr> {
    let values = SqlxValues(statement.values.unwrap_or(Values(Vec::new())));
    let rows = sqlx::query_with(sqlx::AssertSqlSafe(statement.sql), values)
        .persistent(false)
        .fetch_all(connection)
        .await
        .map_err(sqlx_error_to_query_err)?;
    Ok(rows.into_iter().map(QueryResult::from).collect())
}

/// The first row of `statement`, unnamed on `connection` (the server is
/// asked for one row, as the ORM's own `query_one` does).
async fn first_row(
    connection: &mut PgConnection,
    statement: Statement,
) -> Result<Option<QueryResult>, DbErr> {
    let values = SqlxValues(statement.values.unwrap_or(Values(Vec::new())));
    let row = sqlx::query_with(sqlx::AssertSqlSafe(statement.sql), values)
        .persistent(false)
        .fetch_optional(connection)
        .await
        .map_err(sqlx_error_to_query_err)?;
    Ok(row.map(QueryResult::from))
}

/// Runs `statement` unnamed on `connection`.
async fn execute(connection: &mut PgConnection, statement: Statement) -> Result<ExecResult, DbErr> {
    let values = SqlxValues(statement.values.unwrap_or(Values(Vec::new())));
    sqlx::query_with(sqlx::AssertSqlSafe(statement.sql), values)
        .persistent(false)
        .execute(connection)
        .await
        .map(ExecResult::from)
        .map_err(sqlx_error_to_exec_err)
}

/// Runs `sql` with the simple protocol on `connection`.
async fn execute_simple(connection: &mut PgConnection, sql: String) -> Result<ExecResult, DbErr> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(connection)
        .await
        .map(ExecResult::from)
        .map_err(sqlx_error_to_exec_err)
}

#[async_trait::async_trait]
impl ConnectionTrait for Db {
    fn get_database_backend(&self) -> DbBackend {
        DbBackend::Postgres
    }

    async fn execute_raw(&self, statement: Statement) -> Result<ExecResult, DbErr> {
        match self.pooler {
            None => self.orm.execute_raw(statement).await,
            Some(_) => self.alone(|c| Box::pin(execute(c, statement))).await,
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match self.pooler {
            None => self.orm.execute_unprepared(sql).await,
            Some(_) => {
                let sql = sql.to_owned();
                self.alone(|c| Box::pin(execute_simple(c, sql))).await
            }
        }
    }

    async fn query_one_raw(&self, statement: Statement) -> Result<Option<QueryResult>, DbErr> {
        match self.pooler {
            None => self.orm.query_one_raw(statement).await,
            Some(_) => self.alone(|c| Box::pin(first_row(c, statement))).await,
        }
    }

    async fn query_all_raw(&self, statement: Statement) -> Result<Vec<QueryResult>, DbErr> {
        match self.pooler {
            None => self.orm.query_all_raw(statement).await,
            Some(_) => self.alone(|c| Box::pin(rows(c, statement))).await,
        }
    }
}

#[async_trait::async_trait]
impl TransactionTrait for Db {
    type Transaction = Txn;

    async fn begin(&self) -> Result<Txn, DbErr> {
        self.open(None, None).await
    }

    async fn begin_with_config(
        &self,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<Txn, DbErr> {
        self.open(isolation_level, access_mode).await
    }

    async fn begin_with_options(&self, options: TransactionOptions) -> Result<Txn, DbErr> {
        self.open(options.isolation_level, options.access_mode)
            .await
    }

    async fn transaction<F, T, E>(&self, callback: F) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c Txn,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>
            + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        let txn = self
            .open(None, None)
            .await
            .map_err(TransactionError::Connection)?;
        txn.run(callback).await
    }

    async fn transaction_with_config<F, T, E>(
        &self,
        callback: F,
        isolation_level: Option<IsolationLevel>,
        access_mode: Option<AccessMode>,
    ) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c Txn,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>
            + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        let txn = self
            .open(isolation_level, access_mode)
            .await
            .map_err(TransactionError::Connection)?;
        txn.run(callback).await
    }
}

/// A transaction of the store: the ORM's, or one on a connection behind
/// the pooler.
pub(crate) enum Txn {
    /// The ORM's transaction (a direct connection).
    Direct(DatabaseTransaction),
    /// A transaction (or savepoint) whose statements are sent unnamed.
    Pooled(Pooled),
}

impl Txn {
    /// Commits the transaction (a savepoint: releases it).
    pub(crate) async fn commit(self) -> Result<(), DbErr> {
        match self {
            Txn::Direct(txn) => txn.commit().await,
            Txn::Pooled(pooled) => pooled.end(true).await,
        }
    }

    /// Rolls the transaction back (a savepoint: to where it began).
    pub(crate) async fn rollback(self) -> Result<(), DbErr> {
        match self {
            Txn::Direct(txn) => txn.rollback().await,
            Txn::Pooled(pooled) => pooled.end(false).await,
        }
    }

    async fn run<F, T, E>(self, callback: F) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c Txn,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>
            + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        let answer = callback(&self).await;
        match answer {
            Ok(answer) => {
                self.commit().await.map_err(TransactionError::Connection)?;
                Ok(answer)
            }
            Err(error) => {
                self.rollback()
                    .await
                    .map_err(TransactionError::Connection)?;
                Err(TransactionError::Transaction(error))
            }
        }
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Txn {
    fn get_database_backend(&self) -> DbBackend {
        DbBackend::Postgres
    }

    async fn execute_raw(&self, statement: Statement) -> Result<ExecResult, DbErr> {
        match self {
            Txn::Direct(txn) => txn.execute_raw(statement).await,
            Txn::Pooled(pooled) => {
                execute(pooled.lock().await.connection().await?, statement).await
            }
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match self {
            Txn::Direct(txn) => txn.execute_unprepared(sql).await,
            Txn::Pooled(pooled) => {
                execute_simple(pooled.lock().await.connection().await?, sql.to_owned()).await
            }
        }
    }

    async fn query_one_raw(&self, statement: Statement) -> Result<Option<QueryResult>, DbErr> {
        match self {
            Txn::Direct(txn) => txn.query_one_raw(statement).await,
            Txn::Pooled(pooled) => {
                first_row(pooled.lock().await.connection().await?, statement).await
            }
        }
    }

    async fn query_all_raw(&self, statement: Statement) -> Result<Vec<QueryResult>, DbErr> {
        match self {
            Txn::Direct(txn) => txn.query_all_raw(statement).await,
            Txn::Pooled(pooled) => rows(pooled.lock().await.connection().await?, statement).await,
        }
    }
}

#[async_trait::async_trait]
impl TransactionTrait for Txn {
    type Transaction = Txn;

    async fn begin(&self) -> Result<Txn, DbErr> {
        match self {
            Txn::Direct(txn) => txn.begin().await.map(Txn::Direct),
            Txn::Pooled(pooled) => pooled.savepoint().await.map(Txn::Pooled),
        }
    }

    /// A savepoint: its isolation and access are its transaction's.
    async fn begin_with_config(
        &self,
        _isolation_level: Option<IsolationLevel>,
        _access_mode: Option<AccessMode>,
    ) -> Result<Txn, DbErr> {
        self.begin().await
    }

    /// A savepoint: its isolation and access are its transaction's.
    async fn begin_with_options(&self, _options: TransactionOptions) -> Result<Txn, DbErr> {
        self.begin().await
    }

    async fn transaction<F, T, E>(&self, callback: F) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c Txn,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>
            + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        let txn = self.begin().await.map_err(TransactionError::Connection)?;
        txn.run(callback).await
    }

    async fn transaction_with_config<F, T, E>(
        &self,
        callback: F,
        _isolation_level: Option<IsolationLevel>,
        _access_mode: Option<AccessMode>,
    ) -> Result<T, TransactionError<E>>
    where
        F: for<'c> FnOnce(
                &'c Txn,
            )
                -> std::pin::Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>
            + Send,
        T: Send,
        E: std::fmt::Display + std::fmt::Debug + Send,
    {
        self.transaction(callback).await
    }
}

#[async_trait::async_trait]
impl TransactionSession for Txn {
    async fn commit(self) -> Result<(), DbErr> {
        Txn::commit(self).await
    }

    async fn rollback(self) -> Result<(), DbErr> {
        Txn::rollback(self).await
    }
}
