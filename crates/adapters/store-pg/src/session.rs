//! A connection of the driver's pool for statements sent outside the ORM,
//! in a transaction of its own behind a transaction-mode pooler.

use sea_orm::sqlx::pool::PoolConnection;
use sea_orm::sqlx::postgres::{PgConnection, PgPool};
use sea_orm::sqlx::{self, Postgres};

use crate::db::Pooler;

/// A connection of the driver's pool for statements sent outside the ORM:
/// behind the pooler, inside a transaction of its own, committed by
/// [`Session::finish`] (and rolled back when dropped unfinished).
pub(crate) enum Session {
    /// A direct connection: statements kept prepared, no transaction.
    Plain(PoolConnection<Postgres>),
    /// Behind the pooler: statements unnamed, in a transaction.
    Pooled(sqlx::Transaction<'static, Postgres>),
}

impl Session {
    /// A connection of `pool`, in a transaction behind `pooler`.
    pub(crate) async fn acquire(
        pool: &PgPool,
        pooler: Option<&Pooler>,
    ) -> Result<Self, sqlx::Error> {
        match pooler {
            None => pool.acquire().await.map(Session::Plain),
            Some(pooler) => pool
                .begin_with(sqlx::AssertSqlSafe(pooler.begin_sql(None, None)))
                .await
                .map(Session::Pooled),
        }
    }

    /// Whether statements are kept prepared on the connection.
    pub(crate) fn persistent(&self) -> bool {
        matches!(self, Session::Plain(_))
    }

    /// Ends the session: its transaction committed behind the pooler.
    pub(crate) async fn finish(self) -> Result<(), sqlx::Error> {
        match self {
            Session::Plain(_) => Ok(()),
            Session::Pooled(txn) => txn.commit().await,
        }
    }
}

impl std::ops::Deref for Session {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Session::Plain(connection) => connection,
            Session::Pooled(txn) => txn,
        }
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Session::Plain(connection) => connection,
            Session::Pooled(txn) => txn,
        }
    }
}
