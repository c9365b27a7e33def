//! The SQL console's statement: prepared first (so PostgreSQL refuses more
//! than one statement and infers the parameters' types), run with its
//! parameters bound in the binary form of those types, in a transaction of
//! its own with `statement_timeout` (and READ ONLY when asked), its rows
//! written as JSON arrays up to the caps. The audit entry commits with the
//! statement (after it, for a READ ONLY one); a statement PostgreSQL
//! refuses is audited on its own.

use async_trait::async_trait;
use audit::AuditEvent;
use futures_util::TryStreamExt as _;
use kernel::new_id;
use sea_orm::sqlx::postgres::{PgArguments, PgColumn, PgDatabaseError, PgErrorPosition};
use sea_orm::sqlx::{self, Column as _, Either, Executor as _, Row as _, Statement as _};
use sea_orm::sqlx::{AssertSqlSafe, Postgres, SqlSafeStr as _, TypeInfo as _};
use serde_json::{Value, json};
use sql_console::{SqlColumn, SqlFailure, SqlOutput, SqlRun, SqlStore};

use crate::sql_values::{bind, write_any};
use crate::{PgStore, map_sqlx};

/// SQLSTATE of "cannot insert multiple commands into a prepared statement".
const SYNTAX_ERROR: &str = "42601";

#[async_trait]
impl SqlStore for PgStore {
    async fn execute(&self, run: SqlRun<'_>) -> Result<SqlOutput, SqlFailure> {
        let pool = self.db.get_postgres_connection_pool();
        let begin = if run.read_only {
            "BEGIN READ ONLY"
        } else {
            "BEGIN"
        };
        let mut tx = pool.begin_with(begin).await.map_err(map_sqlx)?;
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(run.timeout_ms.to_string())
            .execute(&mut *tx)
            .await
            .map_err(map_sqlx)?;
        match statement(&mut tx, &run).await {
            Ok(output) if run.read_only => {
                // Nothing changed; a READ ONLY transaction cannot take the entry.
                tx.commit().await.map_err(map_sqlx)?;
                insert_audit(pool, &run.audit, None, self.now())
                    .await
                    .map_err(map_sqlx)?;
                Ok(output)
            }
            Ok(output) => {
                insert_audit(&mut *tx, &run.audit, None, self.now())
                    .await
                    .map_err(map_sqlx)?;
                tx.commit().await.map_err(map_sqlx)?;
                Ok(output)
            }
            Err(failure) => {
                // Rolled back (a failed transaction takes nothing more); the
                // refusal is audited on its own.
                drop(tx);
                if let SqlFailure::Refused { message, .. } = &failure {
                    insert_audit(pool, &run.audit, Some(message), self.now())
                        .await
                        .map_err(map_sqlx)?;
                }
                Err(failure)
            }
        }
    }
}

/// Prepares, binds and runs the statement; writes its rows.
async fn statement(
    tx: &mut sqlx::Transaction<'static, Postgres>,
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

/// Writes the console's audit entry, with PostgreSQL's refusal when there is one.
async fn insert_audit<'c>(
    conn: impl sqlx::PgExecutor<'c>,
    event: &AuditEvent,
    error: Option<&str>,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), sqlx::Error> {
    let mut details = event.details.clone();
    if let (Some(error), Value::Object(map)) = (error, &mut details) {
        map.insert("error".to_owned(), json!(error));
    }
    sqlx::query(
        "INSERT INTO svc.audit_log (id, at, actor_type, actor_id, action, target, details, ip) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(new_id())
    .bind(at)
    .bind(event.actor.kind.as_str())
    .bind(event.actor.id)
    .bind(event.action)
    .bind(event.target.as_deref())
    .bind(sqlx::types::Json(details))
    .bind(event.ip.as_deref())
    .execute(conn)
    .await?;
    Ok(())
}
