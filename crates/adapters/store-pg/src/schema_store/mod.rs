//! Tables and resources: creation, evolution and description, with each
//! change, its resource record and its audit entry in one transaction.

pub(crate) mod alter;
pub(crate) mod describe;
pub(crate) mod functions;
mod indexes;

use crate::db::Txn;
use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::sql::quote_ident;
use kernel::{FieldError, StoreError};
use schema::{
    ColumnChange, Confirm, Function, IndexInput, IndexPlan, Plan, Resource, Routine, SchemaStore,
    TableInfo,
};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, QueryResult, Value};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::query::{Begin, Query, Stored};
use crate::{PgStore, map_err, pg_error, rows, stmt};

const RESOURCE_COLUMNS: &str = "id, schema_name, table_name, exposed_methods, created_at";

/// A row of [`RESOURCE_COLUMNS`].
#[derive(FromQueryResult)]
struct ResourceRow {
    id: Uuid,
    schema_name: String,
    table_name: String,
    exposed_methods: Vec<String>,
    created_at: DateTime<Utc>,
}

fn resource(row: &QueryResult) -> Result<Resource, StoreError> {
    let r = rows::row::<ResourceRow>(row)?;
    Ok(Resource {
        id: r.id,
        schema: r.schema_name,
        table: r.table_name,
        exposed_methods: r.exposed_methods,
        created_at: r.created_at,
    })
}

/// A table of a schema as [`describe::TABLES_SQL`] lists it.
#[derive(FromQueryResult)]
pub(crate) struct TableRow {
    name: String,
    resource_id: Option<Uuid>,
    columns: Json,
    indexes: Json,
    foreign_keys: Json,
    referenced_by: Json,
}

impl From<TableRow> for TableInfo {
    fn from(t: TableRow) -> Self {
        TableInfo {
            name: t.name,
            resource_id: t.resource_id,
            columns: t.columns,
            indexes: t.indexes,
            foreign_keys: t.foreign_keys,
            referenced_by: t.referenced_by,
        }
    }
}

/// Adds the SQL that ran to an audit entry's details.
fn with_sql(mut event: AuditEvent, sql: String) -> AuditEvent {
    if let Json::Object(details) = &mut event.details {
        details.insert("sql".into(), Json::String(sql));
    }
    event
}

pub(crate) fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

pub(crate) async fn scalar_bool(
    txn: &Txn,
    sql: &str,
    values: Vec<Value>,
) -> Result<bool, StoreError> {
    let row = txn.fetch_optional(stmt(sql, values)).await?;
    Ok(row
        .map(|r| rows::column::<Option<bool>>(&r, "ok"))
        .transpose()?
        .flatten()
        .unwrap_or(false))
}

/// A DDL failure PostgreSQL explains (wrong default type, bad cast, ...): the
/// client's mistake, reported with PostgreSQL's message but never the SQL.
fn ddl_error(err: DbErr) -> StoreError {
    match pg_error(&err) {
        Some(pg) if pg.code().starts_with("42") || pg.code().starts_with("22") => {
            FieldError::new("columns", pg.message().to_owned()).into()
        }
        Some(pg) if pg.code() == "2BP01" => StoreError::Conflict {
            field: None,
            message: "other tables depend on this table".into(),
        },
        _ => map_err(err),
    }
}

pub(crate) async fn confirm(txn: &Txn, plan: &Plan) -> Result<(), StoreError> {
    txn.run_unprepared("SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '30s'")
        .await?;
    for fact in &plan.confirm {
        match fact {
            Confirm::Type { field, data_type } => {
                let known = scalar_bool(
                    txn,
                    "SELECT to_regtype($1) IS NOT NULL AS ok",
                    vec![data_type.clone().into()],
                )
                .await
                .map_err(|_| FieldError::new(field.clone(), "is not a type name"))?;
                if !known {
                    return Err(
                        FieldError::new(field.clone(), "is not a known PostgreSQL type").into(),
                    );
                }
            }
            Confirm::IntegerType { field, data_type } => {
                let sql = "SELECT to_regtype($1)::text IN ('smallint', 'integer', 'bigint') AS ok";
                if !scalar_bool(txn, sql, vec![data_type.clone().into()]).await? {
                    return Err(FieldError::new(
                        field.clone(),
                        "needs an integer type (smallint, integer or bigint)",
                    )
                    .into());
                }
            }
            Confirm::KeyTarget {
                field,
                schema,
                table,
                column,
            } => {
                let sql = "SELECT EXISTS (SELECT 1 FROM pg_constraint k JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] \
                           WHERE k.conrelid = to_regclass($1) AND k.contype IN ('p', 'u') AND cardinality(k.conkey) = 1 AND a.attname = $2) AS ok";
                if !scalar_bool(
                    txn,
                    sql,
                    vec![qualified(schema, table).into(), column.clone().into()],
                )
                .await?
                {
                    return Err(FieldError::new(
                        field.clone(),
                        "must name an existing table's primary or unique key column",
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// Serializes the changes of one schema until `txn` ends: `CREATE SCHEMA IF
/// NOT EXISTS` is not safe when two transactions create the same schema at
/// once (one fails on the unique name), and a name checked free stays free.
pub(crate) async fn lock_schema(txn: &Txn, schema: &str) -> Result<(), StoreError> {
    txn.run(stmt(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        [format!("tessera.schema:{schema}").into()],
    ))
    .await?;
    Ok(())
}

pub(crate) async fn run(txn: &Txn, plan: &Plan) -> Result<(), StoreError> {
    for statement in &plan.statements {
        txn.execute_unprepared(statement).await.map_err(ddl_error)?;
    }
    Ok(())
}

/// What registering a table already registered does.
pub(crate) enum OnTaken {
    /// Fails: 409 CONFLICT.
    Refuse,
    /// Adds the new check messages to the registration's.
    AddCheckMessages,
}

impl PgStore {
    /// Registers `(id, schema, table)` as a resource in `txn`, created now.
    pub(crate) async fn insert_resource(
        &self,
        txn: &Txn,
        (id, schema, table): (Uuid, &str, &str),
        check_messages: Value,
        on_taken: OnTaken,
    ) -> Result<Resource, StoreError> {
        let on_conflict = match on_taken {
            OnTaken::Refuse => "",
            OnTaken::AddCheckMessages => {
                "ON CONFLICT (schema_name, table_name) DO UPDATE \
                 SET check_messages = svc.resources.check_messages || EXCLUDED.check_messages"
            }
        };
        let sql = format!(
            "INSERT INTO svc.resources (id, schema_name, table_name, check_messages, created_at) \
             VALUES ($1, $2, $3, $4, $5) {on_conflict} RETURNING {RESOURCE_COLUMNS}"
        );
        let values = [
            id.into(),
            schema.into(),
            table.into(),
            check_messages,
            self.now().into(),
        ];
        let row = txn
            .fetch_optional(stmt(&sql, values))
            .await?
            .ok_or(StoreError::NotFound)?;
        resource(&row)
    }
}

pub(crate) fn check_messages(plan: &Plan) -> Value {
    serde_json::to_value(&plan.check_messages)
        .unwrap_or_default()
        .into()
}

#[async_trait]
impl SchemaStore for PgStore {
    async fn create_table(
        &self,
        plan: &Plan,
        resource_id: Uuid,
        execute: bool,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        lock_schema(&txn, &plan.schema).await?;
        confirm(&txn, plan).await?;
        let exists = scalar_bool(
            &txn,
            "SELECT to_regclass($1) IS NOT NULL AS ok",
            vec![qualified(&plan.schema, &plan.table).into()],
        )
        .await?;
        if exists {
            return Err(StoreError::conflict(
                "name",
                "a table with this name exists",
            ));
        }
        // A preview runs the DDL too, so it meets every error create would,
        // then rolls back.
        run(&txn, plan).await?;
        if !execute {
            txn.rollback().stored().await?;
            return Ok(());
        }
        let new = (resource_id, plan.schema.as_str(), plan.table.as_str());
        self.insert_resource(&txn, new, check_messages(plan), OnTaken::Refuse)
            .await?;
        self.commit_catalog_change(txn, event).await
    }

    async fn table_columns(
        &self,
        schema: &str,
        table: &str,
    ) -> Result<Option<Vec<String>>, StoreError> {
        let sql = "SELECT array_agg(a.attname::text ORDER BY a.attnum) AS columns FROM pg_attribute a \
                   WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped";
        let row = self
            .db
            .fetch_optional(stmt(sql, [qualified(schema, table).into()]))
            .await?;
        Ok(row
            .map(|r| rows::column::<Option<Vec<String>>>(&r, "columns"))
            .transpose()?
            .flatten())
    }

    async fn add_column(&self, plan: &Plan, event: AuditEvent) -> Result<Uuid, StoreError> {
        let txn = self.db.open_txn().await?;
        lock_schema(&txn, &plan.schema).await?;
        confirm(&txn, plan).await?;
        run(&txn, plan).await?;
        let new = (kernel::new_id(), plan.schema.as_str(), plan.table.as_str());
        let id = self
            .insert_resource(&txn, new, check_messages(plan), OnTaken::AddCheckMessages)
            .await?
            .id;
        self.commit_catalog_change(txn, event).await?;
        Ok(id)
    }

    async fn drop_table(
        &self,
        schema: &str,
        table: &str,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let sql = "SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relkind IN ('r', 'p')) AS ok";
        if !scalar_bool(&txn, sql, vec![qualified(schema, table).into()]).await? {
            return Ok(false);
        }
        txn.run_unprepared("SET LOCAL lock_timeout = '5s'").await?;
        txn.execute_unprepared(&format!("DROP TABLE {}", qualified(schema, table)))
            .await
            .map_err(ddl_error)?;
        txn.run(stmt(
            "DELETE FROM svc.resources WHERE schema_name = $1 AND table_name = $2",
            [schema.into(), table.into()],
        ))
        .await?;
        self.commit_catalog_change(txn, event).await?;
        Ok(true)
    }

    async fn tables(&self, schema: &str) -> Result<Vec<TableInfo>, StoreError> {
        let only: Option<String> = None;
        let rows = self
            .db
            .fetch_all(stmt(describe::TABLES_SQL, [schema.into(), only.into()]))
            .await?;
        rows.iter()
            .map(|r| Ok(rows::row::<TableRow>(r)?.into()))
            .collect()
    }

    async fn table(&self, schema: &str, table: &str) -> Result<Option<TableInfo>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(describe::TABLES_SQL, [schema.into(), table.into()]))
            .await?;
        Ok(row
            .as_ref()
            .map(rows::row::<TableRow>)
            .transpose()?
            .map(TableInfo::from))
    }

    async fn rename_table(
        &self,
        schema: &str,
        table: &str,
        name: &str,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        let plan = alter::rename_table(&txn, (schema, table), name).await?;
        self.commit_catalog_change(txn, with_sql(event, plan.sql()))
            .await
    }

    async fn change_column(
        &self,
        target: (&str, &str, &str),
        change: &ColumnChange,
        execute: bool,
        event: AuditEvent,
    ) -> Result<String, StoreError> {
        let txn = self.db.open_txn().await?;
        // A preview runs the change too, so it meets every refusal the
        // change would (a value that does not convert, say), then rolls back.
        let sql = alter::change_column(&txn, target, change, true)
            .await?
            .sql();
        if execute {
            self.commit_catalog_change(txn, with_sql(event, sql.clone()))
                .await?;
        } else {
            txn.rollback().stored().await?;
        }
        Ok(sql)
    }

    async fn plan_index(
        &self,
        schema: &str,
        table: &str,
        input: &IndexInput,
    ) -> Result<IndexPlan, StoreError> {
        indexes::plan(self, schema, table, input).await
    }

    async fn build_index(&self, plan: IndexPlan, event: AuditEvent) -> Result<(), StoreError> {
        indexes::build(self, plan, event).await
    }

    async fn drop_index(
        &self,
        target: (&str, &str, &str),
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        indexes::drop_concurrently(self, target, event).await
    }

    async fn resources(&self) -> Result<Vec<Resource>, StoreError> {
        let sql = format!(
            "SELECT {RESOURCE_COLUMNS} FROM svc.resources ORDER BY schema_name, table_name"
        );
        let rows = self.db.fetch_all(stmt(&sql, [])).await?;
        rows.iter().map(resource).collect()
    }

    async fn resource(&self, id: Uuid) -> Result<Option<Resource>, StoreError> {
        let sql = format!("SELECT {RESOURCE_COLUMNS} FROM svc.resources WHERE id = $1");
        let row = self.db.fetch_optional(stmt(&sql, [id.into()])).await?;
        row.as_ref().map(resource).transpose()
    }

    async fn register(&self, new: Resource, event: AuditEvent) -> Result<Resource, StoreError> {
        let txn = self.db.open_txn().await?;
        let sql = "SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relkind IN ('r', 'p', 'v', 'm')) AS ok";
        if !scalar_bool(&txn, sql, vec![qualified(&new.schema, &new.table).into()]).await? {
            return Err(FieldError::new("table", "no such table").into());
        }
        let new = (new.id, new.schema.as_str(), new.table.as_str());
        let empty = serde_json::json!({}).into();
        let registered = self
            .insert_resource(&txn, new, empty, OnTaken::Refuse)
            .await?;
        self.commit_catalog_change(txn, event).await?;
        Ok(registered)
    }

    async fn expose(
        &self,
        id: Uuid,
        methods: Vec<String>,
        event: AuditEvent,
    ) -> Result<Option<Resource>, StoreError> {
        let txn = self.db.open_txn().await?;
        let sql = format!(
            "UPDATE svc.resources SET exposed_methods = $2 WHERE id = $1 RETURNING {RESOURCE_COLUMNS}"
        );
        let Some(row) = txn
            .fetch_optional(stmt(&sql, [id.into(), methods.into()]))
            .await?
        else {
            return Ok(None);
        };
        let updated = resource(&row)?;
        self.commit_catalog_change(txn, event).await?;
        Ok(Some(updated))
    }

    async fn routines(&self, schema: &str, name: &str) -> Result<Vec<Routine>, StoreError> {
        functions::routines(&self.db, schema, name).await
    }

    async fn functions(&self) -> Result<Vec<Function>, StoreError> {
        self.all_functions().await
    }

    async fn function(&self, id: Uuid) -> Result<Option<Function>, StoreError> {
        self.function_by_id(id).await
    }

    async fn register_function(
        &self,
        function: Function,
        event: AuditEvent,
    ) -> Result<Function, StoreError> {
        self.insert_function(function, event).await
    }

    async fn expose_function(
        &self,
        id: Uuid,
        methods: Vec<String>,
        event: AuditEvent,
    ) -> Result<Option<Function>, StoreError> {
        self.expose_function_by_id(id, methods, event).await
    }
}
