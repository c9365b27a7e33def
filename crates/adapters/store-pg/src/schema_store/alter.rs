//! Changes of existing tables: rename, change or drop a column. Each reads the
//! catalog's facts and what uses the table in its own transaction (the
//! schema's lock held), plans from them, runs, and refreshes the resource.

use crate::db::Txn;
use kernel::{FieldError, StoreError};
use schema::{ColumnChange, ColumnFacts, Plan, TableFacts, Usage};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};
use serde_json::Value as Json;
use uuid::Uuid;

use super::describe::{FACTS_SQL, INDEX_USAGE_SQL, REFERENCED_BY_SQL};
use super::{confirm, lock_schema, qualified};
use crate::query::Query;
use crate::{map_err, pg_error, rows, stmt};

/// A row of [`FACTS_SQL`].
#[derive(FromQueryResult)]
struct FactRow {
    name: String,
    data_type: String,
    nullable: bool,
    primary_key: bool,
    checks: Vec<String>,
    unique_name: Option<String>,
}

/// The facts of `schema.table`; `NotFound` when it is not a table.
pub(crate) async fn facts(txn: &Txn, schema: &str, table: &str) -> Result<TableFacts, StoreError> {
    let found = txn
        .fetch_all(stmt(FACTS_SQL, [qualified(schema, table).into()]))
        .await?;
    if found.is_empty() {
        return Err(StoreError::NotFound);
    }
    let columns = found
        .iter()
        .map(|r| {
            let r = rows::row::<FactRow>(r)?;
            Ok(ColumnFacts {
                name: r.name,
                data_type: r.data_type,
                nullable: r.nullable,
                primary_key: r.primary_key,
                checks: r.checks,
                unique: r.unique_name,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(TableFacts {
        schema: schema.to_owned(),
        table: table.to_owned(),
        columns,
    })
}

/// A row of [`INDEX_USAGE_SQL`].
#[derive(FromQueryResult)]
struct IndexUsageRow {
    name: String,
    columns: Vec<String>,
    filter: Option<Json>,
}

/// A row naming a slug and a definition.
#[derive(FromQueryResult)]
struct DefinitionRow {
    slug: String,
    draft: Option<Json>,
    published: Option<Json>,
}

/// The rows of `sql` over `$1 = resource`.
async fn definitions(
    txn: &Txn,
    resource: &str,
    sql: &str,
) -> Result<Vec<DefinitionRow>, StoreError> {
    txn.fetch_all(stmt(sql, [resource.into()]))
        .await?
        .iter()
        .map(rows::row::<DefinitionRow>)
        .collect()
}

/// What uses the table `schema.table`, and the stored filters of its
/// partial indexes.
async fn usage(
    txn: &Txn,
    schema: &str,
    table: &str,
) -> Result<(Usage, Vec<(String, Json)>), StoreError> {
    let resource = format!("{schema}.{table}");
    let grants = txn
        .fetch_all(stmt(
            "SELECT g.id, g.filter FROM svc.grants g JOIN svc.resources r ON r.id = g.resource_id \
             WHERE r.schema_name = $1 AND r.table_name = $2 AND g.filter IS NOT NULL ORDER BY g.id",
            [schema.into(), table.into()],
        ))
        .await?
        .iter()
        .map(|r| {
            Ok((
                rows::column::<Uuid>(r, "id")?,
                rows::column::<Option<Json>>(r, "filter")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    let dataviews = definitions(
        txn,
        &resource,
        "SELECT slug, draft, published FROM svc.dataviews \
         WHERE draft ->> 'source' = $1 OR published ->> 'source' = $1 ORDER BY slug",
    )
    .await?
    .into_iter()
    .map(|d| (d.slug, d.draft.into_iter().chain(d.published).collect()))
    .collect();
    let workflows = definitions(
        txn,
        &resource,
        "SELECT slug, NULL::jsonb AS draft, published FROM svc.workflows \
         WHERE published IS NOT NULL AND strpos(published::text, $1) > 0 ORDER BY slug",
    )
    .await?
    .into_iter()
    .filter_map(|w| Some((w.slug, w.published?)))
    .collect();
    let mut indexes = Vec::new();
    let mut filters = Vec::new();
    for r in txn
        .fetch_all(stmt(
            INDEX_USAGE_SQL,
            [qualified(schema, table).into(), schema.into(), table.into()],
        ))
        .await?
    {
        let r = rows::row::<IndexUsageRow>(&r)?;
        if let Some(filter) = r.filter {
            filters.push((r.name.clone(), filter));
        }
        indexes.push((r.name, r.columns));
    }
    let referenced_by = txn
        .fetch_all(stmt(REFERENCED_BY_SQL, [qualified(schema, table).into()]))
        .await?
        .iter()
        .map(|r| Ok((rows::column(r, "source")?, rows::column(r, "column")?)))
        .collect::<Result<_, StoreError>>()?;
    let usage = Usage {
        resource,
        grants,
        dataviews,
        workflows,
        indexes,
        referenced_by,
    };
    Ok((usage, filters))
}

/// Runs an alter plan's statements; a failure is reported on the field the
/// statement comes from, with the code a row write would give.
pub(super) async fn run_reported(txn: &Txn, plan: &Plan) -> Result<(), StoreError> {
    for (i, statement) in plan.statements.iter().enumerate() {
        let field = plan.fields.get(i).copied().unwrap_or("data");
        txn.execute_unprepared(statement)
            .await
            .map_err(|e| reported(e, field))?;
    }
    Ok(())
}

/// A failed statement reported on `field` with the code a row write would
/// give, or as a conflict with what blocks it.
pub(crate) fn reported(err: DbErr, field: &'static str) -> StoreError {
    match pg_error(&err).map(|pg| (pg.code().to_owned(), pg.message().to_owned())) {
        Some((code, _)) if code == "23505" => StoreError::Conflict {
            field: Some(field),
            message: "existing rows have duplicate values".into(),
        },
        Some((code, _)) if code == "42P07" || code == "42710" => StoreError::Conflict {
            field: Some(field),
            message: "the name is taken".into(),
        },
        Some((code, message)) if code == "2BP01" || code == "0A000" => StoreError::Conflict {
            field: Some(field),
            message: message.into(),
        },
        Some((code, _)) if code == "55P03" || code == "40P01" => StoreError::Conflict {
            field: None,
            message: "the table is busy (a lock was not granted in time): try again".into(),
        },
        Some((code, _)) if code.starts_with("23") => map_err(err),
        Some((code, message)) if code.starts_with("22") || code.starts_with("42") => {
            FieldError::new(field, message).into()
        }
        _ => map_err(err),
    }
}

/// Sets the resource's check messages (an empty message removes one), drops
/// the messages and index filters of constraints and indexes that are gone,
/// and so moves the catalog version every instance compares.
pub(crate) async fn refresh_resource(
    txn: &Txn,
    plan: &Plan,
    index_filter: Option<(&str, &Json)>,
) -> Result<(), StoreError> {
    let (set, removed): (Vec<_>, Vec<_>) = plan
        .check_messages
        .iter()
        .partition(|(_, message)| !message.is_empty());
    let set: serde_json::Map<String, Json> = set
        .into_iter()
        .map(|(k, v)| (k.clone(), Json::String(v.clone())))
        .collect();
    let removed: Vec<String> = removed.into_iter().map(|(k, _)| k.clone()).collect();
    let added_filter = index_filter
        .map(|(name, filter)| serde_json::json!({ name: filter }))
        .unwrap_or_else(|| serde_json::json!({}));
    let sql = "UPDATE svc.resources r SET \
        check_messages = (SELECT coalesce(jsonb_object_agg(m.key, m.value), '{}') FROM jsonb_each(r.check_messages) m \
            WHERE NOT m.key = ANY ($4) AND EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = to_regclass($1) AND k.conname = m.key)) || $3, \
        index_filters = (SELECT coalesce(jsonb_object_agg(f.key, f.value), '{}') FROM jsonb_each(r.index_filters) f \
            WHERE to_regclass(quote_ident(r.schema_name) || '.' || quote_ident(f.key)) IS NOT NULL) || $5 \
        WHERE r.schema_name = $2 AND r.table_name = $6";
    txn.run(stmt(
        sql,
        [
            qualified(&plan.schema, &plan.table).into(),
            plan.schema.clone().into(),
            Json::Object(set).into(),
            removed.into(),
            added_filter.into(),
            plan.table.clone().into(),
        ],
    ))
    .await?;
    Ok(())
}

/// Plans and runs a change of one column in `txn`; answers the plan. With
/// `ddl` false (a snapshot's diff) the change is only planned and checked:
/// no lock on the table or its schema, nothing run on it, no service row
/// changed.
pub(crate) async fn change_column(
    txn: &Txn,
    (schema, table, column): (&str, &str, &str),
    change: &ColumnChange,
    ddl: bool,
) -> Result<Plan, StoreError> {
    if ddl {
        lock_schema(txn, schema).await?;
    }
    let facts = facts(txn, schema, table).await?;
    let current = facts.column(column).ok_or(StoreError::NotFound)?;
    let plan = match change {
        ColumnChange::Alter(patch) => schema::alter_column(&facts, current, patch)?,
        ColumnChange::Drop => schema::drop_column(&facts, current)?,
    };
    let renamed = match change {
        ColumnChange::Alter(patch) => patch.name.as_deref().filter(|n| *n != column),
        ColumnChange::Drop => None,
    };
    if renamed.is_some() || matches!(change, ColumnChange::Drop) {
        let (usage, filters) = usage(txn, schema, table).await?;
        if let Some(user) = usage.user_of(column) {
            return Err(StoreError::Conflict {
                field: None,
                message: format!("{user}; change or remove that first").into(),
            });
        }
        if renamed.is_some()
            && let Some((index, _)) = filters.iter().find(|(_, f)| {
                serde_json::to_string(f).is_ok_and(|t| t.contains(&format!("\"{column}\"")))
            })
        {
            return Err(StoreError::Conflict {
                field: None,
                message: format!(
                    "index {index} filters on column {column}; change or remove that first"
                )
                .into(),
            });
        }
    }
    confirm(txn, &plan).await?;
    if !ddl {
        return Ok(plan);
    }
    run_reported(txn, &plan).await?;
    let grants_sql = match renamed {
        Some(_) => {
            "UPDATE svc.grants SET columns = array_replace(columns, $3, $4) \
                    WHERE resource_id = (SELECT id FROM svc.resources WHERE schema_name = $1 AND table_name = $2) AND $3 = ANY (columns)"
        }
        None => {
            "UPDATE svc.grants SET columns = array_remove(columns, $3) \
                 WHERE resource_id = (SELECT id FROM svc.resources WHERE schema_name = $1 AND table_name = $2) AND $3 = ANY (columns) AND $4 IS NULL"
        }
    };
    txn.run(stmt(
        grants_sql,
        [
            schema.into(),
            table.into(),
            column.into(),
            renamed.map(str::to_owned).into(),
        ],
    ))
    .await?;
    refresh_resource(txn, &plan, None).await?;
    Ok(plan)
}

/// Renames a table in `txn`: its resource, DataViews' sources, published
/// and draft workflows' data steps and the definitions of runs still
/// running follow.
pub(super) async fn rename_table(
    txn: &Txn,
    (schema, table): (&str, &str),
    name: &str,
) -> Result<Plan, StoreError> {
    lock_schema(txn, schema).await?;
    let facts = facts(txn, schema, table).await?;
    let plan = schema::rename_table(&facts, name)?;
    confirm(txn, &plan).await?;
    run_reported(txn, &plan).await?;
    let (from, to) = (
        format!("{schema}.{table}"),
        format!("{schema}.{}", plan.table),
    );
    txn.run(stmt(
        "UPDATE svc.resources SET table_name = $3 WHERE schema_name = $1 AND table_name = $2",
        [schema.into(), table.into(), plan.table.clone().into()],
    ))
    .await?;
    for column in ["draft", "published"] {
        txn.run(stmt(
            &format!(
                "UPDATE svc.dataviews SET {column} = jsonb_set({column}, '{{source}}', to_jsonb($2::text)) \
                 WHERE {column} ->> 'source' = $1"
            ),
            [from.clone().into(), to.clone().into()],
        )).await?;
    }
    let workflows = txn
        .fetch_all(stmt(
            "SELECT slug, draft, published FROM svc.workflows \
             WHERE strpos(draft::text, $1) > 0 OR strpos(coalesce(published::text, ''), $1) > 0 FOR UPDATE",
            [from.clone().into()],
        )).await?;
    for row in workflows {
        let mut w = rows::row::<DefinitionRow>(&row)?;
        let draft_changed = w
            .draft
            .as_mut()
            .is_some_and(|d| schema::rename_resource(d, &from, &to));
        let published_changed = w
            .published
            .as_mut()
            .is_some_and(|p| schema::rename_resource(p, &from, &to));
        if draft_changed || published_changed {
            txn.run(stmt(
                "UPDATE svc.workflows SET draft = $2, published = $3, updated_at = now() \
                 WHERE slug = $1",
                [w.slug.into(), w.draft.into(), w.published.into()],
            ))
            .await?;
        }
    }
    // A run waiting (a delay, a retry) resumes from the definition it
    // started with.
    let running = txn
        .fetch_all(stmt(
            "SELECT id, definition FROM svc.workflow_runs \
             WHERE status = 'RUNNING' AND strpos(definition::text, $1) > 0 FOR UPDATE",
            [from.clone().into()],
        ))
        .await?;
    for row in running {
        let id: uuid::Uuid = rows::column(&row, "id")?;
        let mut definition: serde_json::Value = rows::column(&row, "definition")?;
        if schema::rename_resource(&mut definition, &from, &to) {
            txn.run(stmt(
                "UPDATE svc.workflow_runs SET definition = $2 WHERE id = $1",
                [id.into(), definition.into()],
            ))
            .await?;
        }
    }
    Ok(plan)
}
