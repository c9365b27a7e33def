//! A snapshot's tables: tables, columns and indexes planned by the schema
//! crate as the schema routes plan them, and the Data API's registrations.

use crate::db::Txn;
use kernel::{FieldError, StoreError, new_id};
use schema::{ColumnInput, ForeignKeyInput, IndexInput, TableInput};
use sea_orm::ConnectionTrait;
use snapshot::{Column, Index, Resource, Table};

use snapshot::at;

use super::within;
use crate::schema_store::alter::{facts, refresh_resource, reported};
use crate::schema_store::{
    OnTaken, check_messages, confirm, lock_schema, qualified, run as run_plan,
};
use crate::{PgStore, execute};

/// A snapshot's column as the schema planner takes it.
fn column_input(c: &Column) -> ColumnInput {
    ColumnInput {
        name: c.name.clone(),
        data_type: c.data_type.clone(),
        primary_key: c.primary_key,
        default: c.default.clone(),
        identity: c.identity.clone(),
        nullable: Some(c.nullable),
        foreign_key: c.foreign_key.as_ref().map(|f| ForeignKeyInput {
            target_schema: Some(f.target_schema.clone()),
            target_table: f.target_table.clone(),
            target_column: f.target_column.clone(),
            on_delete: Some(f.on_delete.clone()),
        }),
        check: c.check.clone(),
        check_message: c.check_message.clone(),
        unique: c.unique,
    }
}

/// Creates the table and registers it; a diff makes it without its
/// foreign keys.
pub(super) async fn create(
    store: &PgStore,
    txn: &Txn,
    table: &Table,
    path: &str,
    dry: bool,
) -> Result<String, StoreError> {
    let mut input = TableInput {
        name: table.name.clone(),
        columns: table.columns.iter().map(column_input).collect(),
    };
    let plan = schema::create_table(&table.schema, &input).map_err(|e| at(path, e))?;
    if !dry {
        lock_schema(txn, &plan.schema).await?;
    }
    confirm(txn, &plan).await.map_err(within(path))?;
    if dry {
        // A foreign key locks the table it references against writes: a
        // diff makes the new table without them (their targets are checked
        // above).
        for column in &mut input.columns {
            column.foreign_key = None;
        }
        let unlinked = schema::create_table(&table.schema, &input).map_err(|e| at(path, e))?;
        run_plan(txn, &unlinked).await.map_err(within(path))?;
    } else {
        run_plan(txn, &plan).await.map_err(within(path))?;
    }
    store
        .insert_resource(
            txn,
            (new_id(), &plan.schema, &plan.table),
            check_messages(&plan),
            OnTaken::Refuse,
        )
        .await?;
    Ok(plan.sql())
}

/// Drops the table and its registration; a diff only writes the SQL.
pub(super) async fn drop(
    txn: &Txn,
    (schema, table): (&str, &str),
    dry: bool,
) -> Result<String, StoreError> {
    let sql = format!("DROP TABLE {}", qualified(schema, table));
    if dry {
        return Ok(format!("{sql};"));
    }
    txn.execute_unprepared(&sql)
        .await
        .map_err(|e| reported(e, "tables"))?;
    execute(
        txn,
        "DELETE FROM svc.resources WHERE schema_name = $1 AND table_name = $2",
        vec![schema.into(), table.into()],
    )
    .await?;
    Ok(format!("{sql};"))
}

/// Adds the column, checked against the table's columns; a diff plans
/// and checks it, and registers a table that is not.
pub(super) async fn add_column(
    store: &PgStore,
    txn: &Txn,
    (schema, table): (&str, &str),
    column: &Column,
    path: &str,
    dry: bool,
) -> Result<String, StoreError> {
    if !dry {
        lock_schema(txn, schema).await?;
    }
    let existing: Vec<String> = facts(txn, schema, table)
        .await?
        .columns
        .into_iter()
        .map(|c| c.name)
        .collect();
    let plan = schema::add_column(schema, table, &column_input(column), &existing)
        .map_err(|e| at(path, e))?;
    confirm(txn, &plan).await.map_err(within(path))?;
    if dry {
        // Registered when it is not; a registration is left alone.
        execute(
            txn,
            "INSERT INTO svc.resources (id, schema_name, table_name, check_messages, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (schema_name, table_name) DO NOTHING",
            vec![
                new_id().into(),
                schema.into(),
                table.into(),
                check_messages(&plan),
                store.now().into(),
            ],
        )
        .await?;
        return Ok(plan.sql());
    }
    run_plan(txn, &plan).await.map_err(within(path))?;
    store
        .insert_resource(
            txn,
            (new_id(), schema, table),
            check_messages(&plan),
            OnTaken::AddCheckMessages,
        )
        .await?;
    Ok(plan.sql())
}

/// Drops the index; a diff only writes the SQL.
pub(super) async fn drop_index(
    txn: &Txn,
    (schema, name): (&str, &str),
    dry: bool,
) -> Result<String, StoreError> {
    let sql = format!("DROP INDEX {}", qualified(schema, name));
    if !dry {
        txn.execute_unprepared(&sql)
            .await
            .map_err(|e| reported(e, "tables"))?;
    }
    Ok(format!("{sql};"))
}

/// Registers a table that exists but that the snapshot does not create.
pub(super) async fn register(
    store: &PgStore,
    txn: &Txn,
    (schema, table): (&str, &str),
) -> Result<(), StoreError> {
    let at_resource = format!("resources.{schema}.{table}");
    schema::schema_name(schema).map_err(|e| at(&at_resource, e))?;
    schema::identifier(table, "table").map_err(|e| at(&at_resource, e))?;
    let exists = "SELECT to_regclass($1) IS NOT NULL AS ok";
    if !crate::schema_store::scalar_bool(txn, exists, vec![qualified(schema, table).into()]).await?
    {
        return Err(FieldError::new(
            at_resource,
            "names a table that neither the snapshot nor this instance has",
        )
        .into());
    }
    store
        .insert_resource(
            txn,
            (new_id(), schema, table),
            serde_json::json!({}).into(),
            OnTaken::Refuse,
        )
        .await?;
    Ok(())
}

/// Sets the methods the Data API exposes on a registered table; a diff
/// only checks that it is registered.
pub(super) async fn expose(txn: &Txn, resource: &Resource, dry: bool) -> Result<(), StoreError> {
    if let Some(bad) = resource
        .exposed_methods
        .iter()
        .find(|m| !schema::METHODS.contains(&m.as_str()))
    {
        return Err(FieldError::new(
            format!("resources.{}.exposedMethods", resource.qualified()),
            format!("{bad} is not GET, POST, PATCH or DELETE"),
        )
        .into());
    }
    let methods: Vec<String> = schema::METHODS
        .iter()
        .filter(|m| resource.exposed_methods.iter().any(|e| e == *m))
        .map(|m| (*m).to_owned())
        .collect();
    let found = if dry {
        let registered = "SELECT EXISTS (SELECT 1 FROM svc.resources \
            WHERE schema_name = $1 AND table_name = $2) AS ok";
        crate::schema_store::scalar_bool(
            txn,
            registered,
            vec![
                resource.schema.clone().into(),
                resource.table.clone().into(),
            ],
        )
        .await?
    } else {
        execute(
            txn,
            "UPDATE svc.resources SET exposed_methods = $3 WHERE schema_name = $1 AND table_name = $2",
            vec![resource.schema.clone().into(), resource.table.clone().into(), methods.into()],
        )
        .await?
            > 0
    };
    if !found {
        return Err(FieldError::new(
            format!("resources.{}", resource.qualified()),
            "names a table that neither the snapshot nor this instance has",
        )
        .into());
    }
    Ok(())
}

/// Builds the index in the transaction; a diff only plans it.
pub(super) async fn create_index(
    txn: &Txn,
    (schema, table): (&str, &str),
    index: &Index,
    path: &str,
    dry: bool,
) -> Result<String, StoreError> {
    let facts = facts(txn, schema, table).await?;
    let input = IndexInput {
        name: Some(index.name.clone()),
        columns: index.columns.clone(),
        unique: index.unique,
        method: Some(index.method.clone()),
        filter: index.filter.clone(),
    };
    let plan = schema::create_index(&facts, &input).map_err(|e| at(path, e))?;
    let sql = plan.in_transaction();
    let field = if plan.filter.is_some() {
        "where"
    } else {
        "columns"
    };
    if !dry {
        txn.execute_unprepared(&sql)
            .await
            .map_err(|e| within(path)(reported(e, field)))?;
    }
    if !dry {
        let filter = plan.filter.as_ref().map(|f| (plan.name.as_str(), f));
        let recorded = schema::Plan::nothing(schema, table);
        refresh_resource(txn, &recorded, filter).await?;
    }
    Ok(format!("{sql};"))
}
