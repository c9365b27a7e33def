//! Database functions as resources (API.md 18): the routines of a name as
//! `pg_proc` has them, and the rows of `svc.functions`, each described as
//! its function is now.

use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::StoreError;
use kernel::function::{FunctionSignature, SIGNATURE_SQL};
use schema::{Function, Routine, RoutineKind};
use sea_orm::{FromQueryResult, QueryResult};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::query::{Begin, Query};
use crate::{PgStore, rows, stmt};

/// A registered function with its description: the one function its name
/// resolves to (`to_regproc` answers nothing for a name with overloads).
fn function_sql(filter: &str) -> String {
    format!(
        "SELECT f.id, f.schema_name, f.function_name, f.exposed_methods, f.created_at, \
         (SELECT {SIGNATURE_SQL} FROM pg_proc p \
           WHERE p.oid = to_regproc(format('%I.%I', f.schema_name, f.function_name)) \
             AND p.prokind = 'f') AS signature \
         FROM svc.functions f {filter}"
    )
}

/// A row of [`function_sql`].
#[derive(FromQueryResult)]
struct FunctionRow {
    id: Uuid,
    schema_name: String,
    function_name: String,
    exposed_methods: Vec<String>,
    created_at: DateTime<Utc>,
    signature: Option<Json>,
}

fn function(row: &QueryResult) -> Result<Function, StoreError> {
    let r = rows::row::<FunctionRow>(row)?;
    Ok(Function {
        id: r.id,
        schema: r.schema_name,
        name: r.function_name,
        signature: r.signature.as_ref().and_then(FunctionSignature::from_json),
        exposed_methods: r.exposed_methods,
        created_at: r.created_at,
    })
}

/// A row of the routines of a name.
#[derive(FromQueryResult)]
struct RoutineRow {
    kind: String,
    signature: Json,
}

/// The routines of `schema.name` as the catalog has them on `conn`.
pub(crate) async fn routines(
    conn: &impl Query,
    schema: &str,
    name: &str,
) -> Result<Vec<Routine>, StoreError> {
    let sql = format!(
        "SELECT p.prokind::text AS kind, {SIGNATURE_SQL} AS signature FROM pg_proc p \
         JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2"
    );
    let found = conn
        .fetch_all(stmt(&sql, [schema.into(), name.into()]))
        .await?;
    found
        .iter()
        .map(|row| {
            let r = rows::row::<RoutineRow>(row)?;
            Ok(Routine {
                kind: RoutineKind::from_code(&r.kind),
                signature: FunctionSignature::from_json(&r.signature).ok_or_else(|| {
                    StoreError::Internal("a routine's description did not read".into())
                })?,
            })
        })
        .collect()
}

impl PgStore {
    pub(super) async fn all_functions(&self) -> Result<Vec<Function>, StoreError> {
        let sql = function_sql("ORDER BY f.schema_name, f.function_name");
        let found = self.db.fetch_all(stmt(&sql, [])).await?;
        found.iter().map(function).collect()
    }

    pub(super) async fn function_by_id(&self, id: Uuid) -> Result<Option<Function>, StoreError> {
        let sql = function_sql("WHERE f.id = $1");
        let row = self.db.fetch_optional(stmt(&sql, [id.into()])).await?;
        row.as_ref().map(function).transpose()
    }

    pub(super) async fn insert_function(
        &self,
        new: Function,
        event: AuditEvent,
    ) -> Result<Function, StoreError> {
        let txn = self.db.open_txn().await?;
        let inserted = txn
            .run(stmt(
                "INSERT INTO svc.functions (id, schema_name, function_name, created_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                [
                    new.id.into(),
                    new.schema.as_str().into(),
                    new.name.as_str().into(),
                    new.created_at.into(),
                ],
            ))
            .await?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::conflict("function", "is registered already"));
        }
        self.commit_catalog_change(txn, event).await?;
        Ok(new)
    }

    pub(super) async fn expose_function_by_id(
        &self,
        id: Uuid,
        methods: Vec<String>,
        event: AuditEvent,
    ) -> Result<Option<Function>, StoreError> {
        let txn = self.db.open_txn().await?;
        let changed = txn
            .run(stmt(
                "UPDATE svc.functions SET exposed_methods = $2 WHERE id = $1",
                [id.into(), methods.into()],
            ))
            .await?;
        if changed.rows_affected() == 0 {
            return Ok(None);
        }
        self.commit_catalog_change(txn, event).await?;
        self.function_by_id(id).await
    }
}
