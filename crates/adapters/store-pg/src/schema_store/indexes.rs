//! Index builds: `CREATE INDEX CONCURRENTLY` on a connection of its own,
//! outside any transaction, so that writes to the table go on; a build that
//! fails leaves no invalid index behind.

use audit::AuditEvent;
use kernel::{FieldError, StoreError};
use schema::{IndexInput, IndexPlan};
use sea_orm::sqlx::{self, Connection, PgConnection};

use super::alter::{facts, refresh_resource};
use super::{qualified, scalar_bool};
use crate::query::{Begin, Stored};
use crate::{PgStore, map_sqlx};

/// Index builds and drops at once per process, each on a connection of its
/// own outside the pool.
static BUILDS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Longest an index build may take.
const BUILD_TIMEOUT: &str = "SET statement_timeout = '30min'; SET lock_timeout = '60s'";

/// Reports a failed build on the field it most likely comes from.
fn build_error(err: sqlx::Error, plan: &IndexPlan) -> StoreError {
    let Some(db) = err.as_database_error() else {
        return map_sqlx(err);
    };
    let code = db.code().unwrap_or_default().into_owned();
    match code.as_str() {
        "23505" => StoreError::Conflict {
            field: Some("columns"),
            message: "existing rows have duplicate values".into(),
        },
        "42P07" => StoreError::conflict("name", "an index or table with this name exists"),
        "55P03" | "40P01" => StoreError::conflict(
            "name",
            "the table is busy (a lock was not granted in time): try again",
        ),
        c if c.starts_with("22") && plan.filter.is_some() => {
            FieldError::new("where", db.message().to_owned()).into()
        }
        c if c.starts_with("22") || c.starts_with("42") => {
            FieldError::new("columns", db.message().to_owned()).into()
        }
        _ => map_sqlx(err),
    }
}

/// A connection of its own (outside the pool, closed when dropped), with
/// the timeouts of an index build.
async fn dedicated(
    store: &PgStore,
) -> Result<(PgConnection, tokio::sync::SemaphorePermit<'static>), StoreError> {
    let permit = BUILDS
        .acquire()
        .await
        .map_err(|e| StoreError::Internal(format!("index builds: {e}")))?;
    let options = store.session_pool().connect_options();
    let mut conn = PgConnection::connect_with(&options)
        .await
        .map_err(map_sqlx)?;
    sqlx::raw_sql(BUILD_TIMEOUT)
        .execute(&mut conn)
        .await
        .map_err(map_sqlx)?;
    Ok((conn, permit))
}

/// Runs `sql` on a fresh connection, and on failure drops whatever it left.
async fn run_build(mut conn: PgConnection, plan: IndexPlan) -> Result<(), StoreError> {
    let built = sqlx::raw_sql(sqlx::AssertSqlSafe(plan.sql.clone()))
        .execute(&mut conn)
        .await;
    match built {
        Ok(_) => Ok(()),
        // The name was taken meanwhile: the index there is someone else's.
        Err(err) if err.as_database_error().and_then(|d| d.code()).as_deref() == Some("42P07") => {
            Err(build_error(err, &plan))
        }
        Err(err) => {
            let cleanup = format!(
                "DROP INDEX CONCURRENTLY IF EXISTS {}",
                qualified(&plan.schema, &plan.name)
            );
            if let Err(cleanup_err) = sqlx::raw_sql(sqlx::AssertSqlSafe(cleanup))
                .execute(&mut conn)
                .await
            {
                tracing::error!(error = %cleanup_err, index = %plan.name, "dropping a failed index build");
            }
            Err(build_error(err, &plan))
        }
    }
}

/// Plans an index over `schema.table`: the table's facts, the name free.
pub(super) async fn plan(
    store: &PgStore,
    schema: &str,
    table: &str,
    input: &IndexInput,
) -> Result<IndexPlan, StoreError> {
    let txn = store.db.open_txn().await?;
    let facts = facts(&txn, schema, table).await?;
    let plan = schema::create_index(&facts, input)?;
    let taken = scalar_bool(
        &txn,
        "SELECT to_regclass($1) IS NOT NULL AS ok",
        vec![qualified(schema, &plan.name).into()],
    )
    .await?;
    txn.rollback().stored().await?;
    if taken {
        return Err(StoreError::conflict(
            "name",
            "an index or table with this name exists",
        ));
    }
    Ok(plan)
}

/// Builds a planned index concurrently, then records its filter and the
/// audit entry. The build goes on to its end (or its cleanup) even when
/// the request that asked for it is gone.
pub(super) async fn build(
    store: &PgStore,
    plan: IndexPlan,
    event: AuditEvent,
) -> Result<(), StoreError> {
    let (conn, permit) = dedicated(store).await?;
    let store = store.clone();
    let task = tokio::spawn(async move {
        let built = run_build(conn, plan.clone()).await;
        drop(permit);
        built?;
        let txn = store.db.open_txn().await?;
        let filter = plan.filter.as_ref().map(|f| (plan.name.as_str(), f));
        refresh_resource(
            &txn,
            &schema::Plan::nothing(&plan.schema, &plan.table),
            filter,
        )
        .await?;
        store.commit_catalog_change(txn, event).await
    });
    task.await
        .map_err(|e| StoreError::Internal(format!("index build task: {e}")))?
}

/// Drops index `name` of `schema.table` concurrently; `NotFound` when the
/// table has no such index, 409 for the index of a key or constraint.
pub(super) async fn drop_concurrently(
    store: &PgStore,
    (schema, table, name): (&str, &str, &str),
    event: AuditEvent,
) -> Result<(), StoreError> {
    let txn = store.db.open_txn().await?;
    let sql = "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass($1) AND i.indexrelid = to_regclass($2)) AS ok";
    let found = scalar_bool(
        &txn,
        sql,
        vec![
            qualified(schema, table).into(),
            qualified(schema, name).into(),
        ],
    )
    .await?;
    let constraint = found
        && scalar_bool(
            &txn,
            "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = to_regclass($1)) AS ok",
            vec![qualified(schema, name).into()],
        )
        .await?;
    txn.rollback().stored().await?;
    if !found {
        return Err(StoreError::NotFound);
    }
    if constraint {
        return Err(StoreError::conflict(
            "name",
            "the index belongs to a key or unique constraint: change the column instead",
        ));
    }
    let (mut conn, permit) = dedicated(store).await?;
    let statement = schema::drop_index(schema, name)?;
    let store = store.clone();
    let (schema, table) = (schema.to_owned(), table.to_owned());
    let task = tokio::spawn(async move {
        let dropped = sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut conn)
            .await;
        drop(permit);
        dropped.map_err(
            |e| match e.as_database_error().and_then(|d| d.code()).as_deref() {
                Some("2BP01") => StoreError::conflict("name", "a constraint depends on the index"),
                Some("55P03" | "40P01") => StoreError::conflict(
                    "name",
                    "the table is busy (a lock was not granted in time): try again",
                ),
                _ => map_sqlx(e),
            },
        )?;
        let txn = store.db.open_txn().await?;
        refresh_resource(&txn, &schema::Plan::nothing(&schema, &table), None).await?;
        store.commit_catalog_change(txn, event).await
    });
    task.await
        .map_err(|e| StoreError::Internal(format!("index drop task: {e}")))?
}
