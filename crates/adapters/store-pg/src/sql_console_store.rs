//! The SQL console's statement: prepared first (so PostgreSQL refuses more
//! than one statement and infers the parameters' types), run with its
//! parameters bound in the binary form of those types, in a transaction of
//! its own on a connection of its own (closed afterwards, so nothing the
//! statement sets stays in the pool) with `statement_timeout` (and READ ONLY
//! when asked), its rows written as JSON arrays up to the caps. The audit
//! entry is written first, on its own, and PostgreSQL's refusal added to it.

use async_trait::async_trait;
use audit::AuditEvent;
use futures_util::TryStreamExt as _;
use kernel::new_id;
use sea_orm::sqlx::postgres::{PgArguments, PgColumn, PgDatabaseError, PgErrorPosition};
use sea_orm::sqlx::{self, Column as _, Either, Executor as _, Row as _, Statement as _};
use sea_orm::sqlx::{AssertSqlSafe, Postgres, SqlSafeStr as _, TypeInfo as _};
use sql_console::{SqlColumn, SqlFailure, SqlOutput, SqlRun, SqlStore};
use uuid::Uuid;

use crate::sql_values::{bind, write_any};
use crate::{PgStore, map_sqlx};

/// SQLSTATE of "cannot insert multiple commands into a prepared statement".
const SYNTAX_ERROR: &str = "42601";

#[async_trait]
impl SqlStore for PgStore {
    async fn execute(&self, run: SqlRun<'_>) -> Result<SqlOutput, SqlFailure> {
        // A session of its own: behind a transaction pooler, on a direct
        // connection.
        let pool = self.session_pool();
        // Written before the statement runs, on its own: whatever the
        // statement does to its session or transaction (SET ROLE, COMMIT,
        // read-only), the call is on record.
        let entry = insert_audit(pool, &run.audit, self.now())
            .await
            .map_err(map_sqlx)?;
        let outcome = run_statement(pool, &run).await;
        if let Err(SqlFailure::Refused { message, .. }) = &outcome {
            note_error(pool, entry, message).await.map_err(map_sqlx)?;
        }
        outcome
    }
}

/// Runs the statement in a transaction of its own, on a connection of its
/// own that is closed afterwards (so nothing the statement sets, such as a
/// role or a `search_path`, reaches another request).
async fn run_statement(pool: &sqlx::PgPool, run: &SqlRun<'_>) -> Result<SqlOutput, SqlFailure> {
    let begin = if run.read_only {
        "BEGIN READ ONLY"
    } else {
        "BEGIN"
    };
    let mut connection = pool.acquire().await.map_err(map_sqlx)?;
    connection.close_on_drop();
    let mut tx = sqlx::Connection::begin_with(&mut *connection, begin)
        .await
        .map_err(map_sqlx)?;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(run.timeout_ms.to_string())
        .execute(&mut *tx)
        .await
        .map_err(map_sqlx)?;
    let output = statement(&mut tx, run).await?;
    // A deferred constraint may still refuse the change here.
    tx.commit().await.map_err(refused)?;
    Ok(output)
}

/// Prepares, binds and runs the statement; writes its rows.
async fn statement(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    run: &SqlRun<'_>,
) -> Result<SqlOutput, SqlFailure> {
    let prepared = (&mut **tx)
        .prepare(AssertSqlSafe(run.query.to_owned()).into_sql_str())
        .await
        .map_err(refused)?;
    let types = match prepared.parameters() {
        Some(Either::Left(types)) => types.to_vec(),
        _ => Vec::new(),
    };
    if types.len() != run.params.len() {
        return Err(SqlFailure::BadParameter {
            field: "params".to_owned(),
            message: format!(
                "the statement takes {} parameters, {} given",
                types.len(),
                run.params.len()
            ),
        });
    }
    let mut arguments = PgArguments::default();
    for (index, (value, ty)) in run.params.iter().zip(&types).enumerate() {
        bind(&mut arguments, value, ty).map_err(|message| SqlFailure::BadParameter {
            field: format!("params[{index}]"),
            message,
        })?;
    }
    let columns: Vec<PgColumn> = prepared.columns().to_vec();
    let mut rows = String::from("[");
    let (mut returned, mut sent, mut truncated) = (0u64, 0usize, false);
    if columns.is_empty() {
        let done = prepared
            .query_with(arguments)
            .execute(&mut **tx)
            .await
            .map_err(refused)?;
        returned = done.rows_affected();
    } else {
        let mut results = prepared.query_with(arguments).fetch(&mut **tx);
        while let Some(row) = results.try_next().await.map_err(refused)? {
            returned += 1;
            if truncated || sent == run.row_cap || rows.len() > run.byte_cap {
                truncated = true;
                continue;
            }
            if sent > 0 {
                rows.push(',');
            }
            rows.push('[');
            for (i, column) in columns.iter().enumerate() {
                if i > 0 {
                    rows.push(',');
                }
                let value = row.try_get_raw(i).map_err(map_sqlx)?;
                write_any(&mut rows, column.type_info(), value)?;
            }
            rows.push(']');
            sent += 1;
        }
    }
    rows.push(']');
    Ok(SqlOutput {
        columns: columns
            .iter()
            .map(|c| SqlColumn {
                name: c.name().to_owned(),
                type_name: c.type_info().name().to_lowercase(),
            })
            .collect(),
        rows,
        row_count: returned,
        truncated,
    })
}

/// PostgreSQL's refusal of the statement (with its position), more than
/// one statement, or a failure of the store.
fn refused(error: sqlx::Error) -> SqlFailure {
    let Some(pg) = database_error(&error) else {
        return SqlFailure::Store(map_sqlx(error));
    };
    if pg.code() == SYNTAX_ERROR && pg.message().contains("multiple commands") {
        return SqlFailure::SeveralStatements;
    }
    // Connection exceptions and shutdowns stay 503 UNAVAILABLE.
    if pg.code().starts_with("08") || pg.code().starts_with("57P") {
        return SqlFailure::Store(map_sqlx(error));
    }
    SqlFailure::Refused {
        message: pg.message().to_owned(),
        position: match pg.position() {
            Some(PgErrorPosition::Original(at)) => Some(at),
            _ => None,
        },
    }
}

fn database_error(error: &sqlx::Error) -> Option<&PgDatabaseError> {
    match error {
        sqlx::Error::Database(db) => db.try_downcast_ref(),
        _ => None,
    }
}

/// Writes the console's audit entry; answers its id.
async fn insert_audit(
    pool: &sqlx::PgPool,
    event: &AuditEvent,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<Uuid, sqlx::Error> {
    let id = new_id();
    sqlx::query(
        "INSERT INTO svc.audit_log (id, at, actor_type, actor_id, action, target, details, ip) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(id)
    .bind(at)
    .bind(event.actor.kind.as_str())
    .bind(event.actor.id)
    .bind(event.action)
    .bind(event.target.as_deref())
    .bind(sqlx::types::Json(&event.details))
    .bind(event.ip.as_deref())
    .execute(pool)
    .await?;
    Ok(id)
}

/// Adds PostgreSQL's refusal to the call's audit entry.
async fn note_error(pool: &sqlx::PgPool, entry: Uuid, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE svc.audit_log SET details = details || jsonb_build_object('error', $2::text) \
         WHERE id = $1",
    )
    .bind(entry)
    .bind(error)
    .execute(pool)
    .await?;
    Ok(())
}
