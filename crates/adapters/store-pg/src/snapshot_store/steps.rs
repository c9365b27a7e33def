//! One snapshot step run in the apply's transaction. Names are turned into
//! ids here, where the earlier steps' creations are visible; a name that
//! nothing has is refused on the snapshot's path to it.

use kernel::filter::Filter;
use kernel::settings::{Settings, SettingsPatch};
use kernel::{FieldError, StoreError, new_id};
use schema::{ColumnChange, ColumnInput, ForeignKeyInput, IndexInput, TableInput};
use sea_orm::{ConnectionTrait, DatabaseTransaction};
use serde_json::{Map, Value as Json};
use snapshot::{Column, Dashboard, DataView, Grant, Index, Operation, Role, Table, Workflow};
use uuid::Uuid;

use crate::schema_store::alter::{change_column, facts, refresh_resource, reported};
use crate::schema_store::{
    OnTaken, check_messages, confirm, lock_schema, qualified, run as run_plan,
};
use crate::{PgStore, execute, map_err, rows, stmt};

/// A refusal of the input at `path`.
fn at(path: &str, e: FieldError) -> StoreError {
    let field = if e.field.is_empty() {
        path.to_owned()
    } else {
        format!("{path}.{}", e.field)
    };
    FieldError::new(field, e.message).into()
}

/// `at` for a store refusal that is a field's.
fn within(path: &str) -> impl Fn(StoreError) -> StoreError + '_ {
    move |e| match e {
        StoreError::Invalid(f) => at(path, f),
        other => other,
    }
}

/// The id `sql` (over `$1`) finds, or a refusal at `path`.
async fn id_of(
    txn: &DatabaseTransaction,
    sql: &str,
    name: &str,
    path: &str,
) -> Result<Uuid, StoreError> {
    let row = txn
        .query_one_raw(stmt(sql, [name.into()]))
        .await
        .map_err(map_err)?;
    match row {
        Some(r) => rows::column(&r, "id"),
        None => Err(FieldError::new(
            path.to_owned(),
            format!("names {name}, which neither the snapshot nor this instance has"),
        )
        .into()),
    }
}

const ROLE_ID: &str = "SELECT id FROM svc.roles WHERE lower(name) = lower($1)";
const RESOURCE_ID: &str =
    "SELECT id FROM svc.resources WHERE schema_name || '.' || table_name = $1";
const WORKFLOW_ID: &str = "SELECT id FROM svc.workflows WHERE slug = $1";
const DATAVIEW_ID: &str = "SELECT id FROM svc.dataviews WHERE slug = $1";
const USER_ID: &str = "SELECT id FROM svc.users WHERE lower(email) = lower($1) AND active";

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

/// Runs one step; answers the SQL of a schema step. With `dry` (a diff),
/// nothing takes a lock another session could wait on: a table that
/// exists gets no DDL (it is planned and checked against the catalog),
/// new tables are made without their foreign keys, no event trigger is
/// set, no schema lock is taken, and no row of the service tables that
/// exists is changed or deleted. New rows (roles, resources, workflows,
/// DataViews, grants) are written, and rolled back with the diff, so that
/// later steps find the names; what earlier steps would change in rows
/// that exist (settings, a DataView's columns) is kept in the [`Memo`].
pub(super) async fn run(
    store: &PgStore,
    txn: &DatabaseTransaction,
    operation: &Operation,
    memo: &mut Memo,
    dry: bool,
) -> Result<Option<String>, StoreError> {
    // Grants run one after another with nothing changing between them;
    // anything else may change what the memo holds.
    if !matches!(operation, Operation::CreateGrant(..)) {
        memo.forget_lookups();
    }
    match operation {
        Operation::PutRole(role) => put_role(txn, role, dry).await.map(|()| None),
        // A diff deletes nothing: no later step needs a row gone.
        Operation::DropRole(_)
        | Operation::DropWorkflow(_)
        | Operation::DropDataView(_)
        | Operation::DropDashboard(_)
        | Operation::DropGrant(_)
            if dry =>
        {
            Ok(None)
        }
        Operation::DropRole(name) => {
            execute(
                txn,
                "DELETE FROM svc.roles WHERE lower(name) = lower($1) AND NOT built_in",
                vec![name.clone().into()],
            )
            .await?;
            Ok(None)
        }
        Operation::CreateTable(table, path) => {
            create_table(store, txn, table, path, dry).await.map(Some)
        }
        Operation::DropTable(schema, table) => {
            let sql = format!("DROP TABLE {}", qualified(schema, table));
            if dry {
                return Ok(Some(format!("{sql};")));
            }
            txn.execute_unprepared(&sql)
                .await
                .map_err(|e| reported(e, "tables"))?;
            execute(
                txn,
                "DELETE FROM svc.resources WHERE schema_name = $1 AND table_name = $2",
                vec![schema.clone().into(), table.clone().into()],
            )
            .await?;
            Ok(Some(format!("{sql};")))
        }
        Operation::AddColumn(schema, table, column, path) => {
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
                        schema.clone().into(),
                        table.clone().into(),
                        check_messages(&plan),
                        store.now().into(),
                    ],
                )
                .await?;
                return Ok(Some(plan.sql()));
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
            Ok(Some(plan.sql()))
        }
        Operation::AlterColumn(schema, table, column, patch, path) => {
            let change = ColumnChange::Alter(patch.clone());
            Ok(Some(
                change_column(txn, (schema, table, column), &change, !dry)
                    .await
                    .map_err(within(path))?
                    .sql(),
            ))
        }
        Operation::DropColumn(schema, table, column) => Ok(Some(
            change_column(txn, (schema, table, column), &ColumnChange::Drop, !dry)
                .await?
                .sql(),
        )),
        Operation::CreateIndex(schema, table, index, path) => {
            create_index(txn, (schema, table), index, path, dry)
                .await
                .map(Some)
        }
        Operation::DropIndex(schema, name) => {
            let sql = format!("DROP INDEX {}", qualified(schema, name));
            if dry {
                return Ok(Some(format!("{sql};")));
            }
            txn.execute_unprepared(&sql)
                .await
                .map_err(|e| reported(e, "tables"))?;
            Ok(Some(format!("{sql};")))
        }
        Operation::RegisterResource(schema, table) => {
            let at_resource = format!("resources.{schema}.{table}");
            schema::schema_name(schema).map_err(|e| at(&at_resource, e))?;
            schema::identifier(table, "table").map_err(|e| at(&at_resource, e))?;
            let exists = "SELECT to_regclass($1) IS NOT NULL AS ok";
            if !crate::schema_store::scalar_bool(txn, exists, vec![qualified(schema, table).into()])
                .await?
            {
                return Err(FieldError::new(
                    format!("resources.{schema}.{table}"),
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
            Ok(None)
        }
        Operation::Expose(resource) => {
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
            Ok(None)
        }
        Operation::PutWorkflow(workflow, path) => put_workflow(txn, workflow, path, dry, memo)
            .await
            .map(|()| None),
        Operation::DropWorkflow(slug) => {
            execute(
                txn,
                "DELETE FROM svc.workflows WHERE slug = $1",
                vec![slug.clone().into()],
            )
            .await?;
            Ok(None)
        }
        Operation::PutDataView(view, path) => put_dataview(txn, view, path, dry, memo)
            .await
            .map(|()| None),
        Operation::DropDataView(slug) => {
            execute(
                txn,
                "DELETE FROM svc.dataviews WHERE slug = $1",
                vec![slug.clone().into()],
            )
            .await?;
            Ok(None)
        }
        Operation::PutDashboard(dashboard, path) => put_dashboard(txn, dashboard, path, dry, memo)
            .await
            .map(|()| None),
        Operation::DropDashboard(slug) => {
            execute(
                txn,
                "DELETE FROM svc.dashboards WHERE slug = $1",
                vec![slug.clone().into()],
            )
            .await?;
            Ok(None)
        }
        Operation::CreateGrant(grant, path) => create_grants(txn, &[(grant, path)], memo)
            .await
            .map(|()| None),
        Operation::DropGrant(grant) => {
            execute(
                txn,
                "DELETE FROM svc.grants g USING svc.roles r WHERE r.id = g.role_id AND r.name = $1 AND g.action = $2 \
                 AND g.filter IS NOT DISTINCT FROM $3 AND g.columns IS NOT DISTINCT FROM $4 \
                 AND g.resource_id IS NOT DISTINCT FROM (SELECT id FROM svc.resources WHERE schema_name || '.' || table_name = $5) \
                 AND g.workflow_id IS NOT DISTINCT FROM (SELECT id FROM svc.workflows WHERE slug = $6) \
                 AND g.data_view_id IS NOT DISTINCT FROM (SELECT id FROM svc.dataviews WHERE slug = $7)",
                vec![
                    grant.role.clone().into(),
                    grant.action.clone().into(),
                    grant.filter.clone().into(),
                    grant.columns.clone().into(),
                    grant.resource.clone().into(),
                    grant.workflow.clone().into(),
                    grant.data_view.clone().into(),
                ],
            )
            .await?;
            Ok(None)
        }
        Operation::SetSetting(key, value) => {
            set_setting(txn, key, value, dry, memo).await.map(|()| None)
        }
    }
}

async fn put_role(txn: &DatabaseTransaction, role: &Role, dry: bool) -> Result<(), StoreError> {
    let path = format!("roles.{}", role.name);
    let name = kernel::validate::short_text(&role.name, "name", 200).map_err(|e| at(&path, e))?;
    let built_in =
        "SELECT EXISTS (SELECT 1 FROM svc.roles WHERE lower(name) = lower($1) AND built_in) AS ok";
    if crate::schema_store::scalar_bool(txn, built_in, vec![name.clone().into()]).await? {
        return Err(FieldError::new(path, "is a built-in role, which every instance has").into());
    }
    // Never administrator power: a snapshot's roles reach the Data API only.
    let on_taken = if dry {
        "DO NOTHING"
    } else {
        "DO UPDATE SET description = EXCLUDED.description, api_access = EXCLUDED.api_access"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.roles (id, name, description, api_access) VALUES ($1, $2, $3, $4) \
             ON CONFLICT ((lower(name))) {on_taken}"
        ),
        vec![
            new_id().into(),
            name.into(),
            role.description.clone().into(),
            role.api_access.into(),
        ],
    )
    .await?;
    Ok(())
}

async fn create_table(
    store: &PgStore,
    txn: &DatabaseTransaction,
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

async fn create_index(
    txn: &DatabaseTransaction,
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

/// A `{ trigger, steps }` of a snapshot with ids for names, checked as a
/// workflow definition.
async fn definition_ids(
    txn: &DatabaseTransaction,
    definition: &Json,
    path: &str,
) -> Result<Json, StoreError> {
    let mut definition = definition.clone();
    if let Some(trigger) = definition.get_mut("trigger").and_then(Json::as_object_mut) {
        if let Some(email) = trigger
            .get("executeAs")
            .and_then(Json::as_str)
            .map(str::to_owned)
        {
            let id = id_of(txn, USER_ID, &email, &format!("{path}.trigger.executeAs")).await?;
            trigger.insert("executeAs".into(), Json::String(id.to_string()));
        }
        if let Some(resource) = trigger.remove("resource") {
            let name = resource.as_str().unwrap_or_default();
            let id = id_of(txn, RESOURCE_ID, name, &format!("{path}.trigger.resource")).await?;
            trigger.insert("resourceId".into(), Json::String(id.to_string()));
        }
    }
    Ok(definition)
}

async fn put_workflow(
    txn: &DatabaseTransaction,
    workflow: &Workflow,
    path: &str,
    dry: bool,
    memo: &Memo,
) -> Result<(), StoreError> {
    let slug = kernel::validate::slug(&workflow.slug, "slug").map_err(|e| at(path, e))?;
    let name =
        kernel::validate::short_text(&workflow.name, "name", 200).map_err(|e| at(path, e))?;
    let settings = current_settings(txn, memo).await?;
    let max_wait = settings
        .value("workflows.max_sync_wait_ms")
        .as_u64()
        .unwrap_or(u64::MAX);
    // A secret exported as [REDACTED] keeps the value stored here.
    let stored = txn
        .query_one_raw(stmt(
            "SELECT draft, published FROM svc.workflows WHERE slug = $1",
            [slug.clone().into()],
        ))
        .await
        .map_err(map_err)?;
    let stored_of = |column: &str| -> Option<Json> {
        stored
            .as_ref()
            .and_then(|row| rows::column::<Option<Json>>(row, column).ok().flatten())
    };
    let (stored_draft, stored_published) = (stored_of("draft"), stored_of("published"));
    let draft_path = format!("{path}.draft");
    let mut desired_draft = workflow.draft.clone();
    workflows::restore_secrets(
        &mut desired_draft,
        stored_draft.as_ref().or(stored_published.as_ref()),
        &draft_path,
    )?;
    let draft = definition_ids(txn, &desired_draft, &draft_path).await?;
    workflows::model::Definition::parse(&draft["trigger"], &draft["steps"], max_wait)
        .map_err(|e| at(&draft_path, e))?;
    let mut target = None;
    let mut first_tick = None;
    let published = match &workflow.published {
        None => None,
        Some(p) => {
            let published_path = format!("{path}.published");
            let mut p = p.clone();
            workflows::restore_secrets(
                &mut p,
                stored_published.as_ref().or(stored_draft.as_ref()),
                &published_path,
            )?;
            let p = definition_ids(txn, &p, &published_path).await?;
            let parsed = workflows::model::Definition::parse(&p["trigger"], &p["steps"], max_wait)
                .map_err(|e| at(&published_path, e))?;
            if let workflows::model::Trigger::DbEvent(event) = &parsed.trigger {
                let kinds: Vec<String> =
                    event.events.iter().map(|k| k.as_str().to_owned()).collect();
                target = Some((event.resource_id, kinds));
            }
            if let workflows::model::Trigger::Schedule(schedule) = &parsed.trigger {
                let system = settings
                    .system_timezone()
                    .and_then(|zone| zone.parse().ok())
                    .unwrap_or(chrono_tz::Tz::UTC);
                first_tick = schedule
                    .ticks_after(chrono::Utc::now(), schedule.zone(system), 1)
                    .into_iter()
                    .next();
            }
            Some(p)
        }
    };
    if let Some((resource, _)) = &target
        && !dry
    {
        PgStore::capture_events(txn, *resource).await?;
    }
    let (resource, kinds) = target.map_or((None, Vec::new()), |(r, k)| (Some(r), k));
    let on_taken = if dry { "DO NOTHING" } else { WORKFLOW_UPDATE };
    execute(
        txn,
        &format!("INSERT INTO svc.workflows (id, slug, name, enabled, draft, published, published_at, event_resource_id, event_kinds, schedule_next_at) \
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $6::jsonb IS NULL THEN NULL ELSE now() END, $7, $8, $9) \
         ON CONFLICT (slug) {on_taken}"),
        vec![new_id().into(), slug.into(), name.into(), workflow.enabled.into(), draft.into(), published.into(), resource.into(), kinds.into(), first_tick.into()],
    )
    .await?;
    Ok(())
}

/// A stored workflow replaced by the snapshot's.
const WORKFLOW_UPDATE: &str = "DO UPDATE SET name = EXCLUDED.name, enabled = EXCLUDED.enabled, draft = EXCLUDED.draft, \
         published = EXCLUDED.published, \
         published_at = CASE WHEN svc.workflows.published IS NOT DISTINCT FROM EXCLUDED.published THEN svc.workflows.published_at ELSE EXCLUDED.published_at END, \
         event_resource_id = EXCLUDED.event_resource_id, event_kinds = EXCLUDED.event_kinds, \
         schedule_next_at = CASE WHEN EXCLUDED.schedule_next_at IS NULL THEN NULL \
           WHEN svc.workflows.published IS NOT DISTINCT FROM EXCLUDED.published \
             THEN coalesce(svc.workflows.schedule_next_at, EXCLUDED.schedule_next_at) \
           ELSE EXCLUDED.schedule_next_at END, updated_at = now()";

async fn put_dataview(
    txn: &DatabaseTransaction,
    view: &DataView,
    path: &str,
    dry: bool,
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let slug = kernel::validate::slug(&view.slug, "slug").map_err(|e| at(path, e))?;
    let name = kernel::validate::short_text(&view.name, "name", 200).map_err(|e| at(path, e))?;
    for (field, definition) in [
        ("draft", Some(&view.draft)),
        ("published", view.published.as_ref()),
    ] {
        let Some(definition) = definition else {
            continue;
        };
        let at_definition = format!("{path}.{field}");
        let empty = Map::new();
        let parsed = views::definition::Definition::parse(definition.as_object().unwrap_or(&empty))
            .map_err(|e| at(&at_definition, e))?;
        source_columns(txn, &parsed, &at_definition).await?;
    }
    let on_taken = if dry {
        // Later steps read the columns the snapshot gives it.
        let shown = view.published.as_ref().unwrap_or(&view.draft);
        memo.view_columns.insert(slug.clone(), output_names(shown));
        "DO NOTHING"
    } else {
        "DO UPDATE SET name = EXCLUDED.name, draft = EXCLUDED.draft, published = EXCLUDED.published, \
         published_at = CASE WHEN svc.dataviews.published IS NOT DISTINCT FROM EXCLUDED.published THEN svc.dataviews.published_at ELSE EXCLUDED.published_at END, \
         updated_at = now()"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.dataviews (id, slug, name, draft, published, published_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, CASE WHEN $5::jsonb IS NULL THEN NULL ELSE now() END, now(), now()) \
             ON CONFLICT (slug) {on_taken}"
        ),
        vec![new_id().into(), slug.into(), name.into(), view.draft.clone().into(), view.published.clone().into()],
    )
    .await?;
    Ok(())
}

/// The output column names of a DataView definition.
fn output_names(definition: &Json) -> Vec<String> {
    definition["columns"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The output columns of the DataView `slug`: what an earlier step of
/// this diff gives it, else what is stored (None: no such DataView).
async fn view_outputs(
    txn: &DatabaseTransaction,
    memo: &Memo,
    slug: &str,
) -> Result<Option<Vec<String>>, StoreError> {
    if let Some(columns) = memo.view_columns.get(slug) {
        return Ok(Some(columns.clone()));
    }
    let row = txn
        .query_one_raw(stmt(
            "SELECT ARRAY(SELECT c ->> 'name' FROM jsonb_array_elements(coalesce(published, draft) -> 'columns') c) AS names \
             FROM svc.dataviews WHERE slug = $1",
            [slug.into()],
        ))
        .await
        .map_err(map_err)?;
    row.map(|r| rows::column::<Vec<String>>(&r, "names"))
        .transpose()
}

/// Checks that a DataView's source is a table with the columns it names.
async fn source_columns(
    txn: &DatabaseTransaction,
    definition: &views::definition::Definition,
    path: &str,
) -> Result<(), StoreError> {
    let source = facts(txn, &definition.schema, &definition.table)
        .await
        .map_err(|_| FieldError::new(format!("{path}.source"), "is not a table"))?;
    let named = definition.columns.iter().filter_map(|c| match &c.measure {
        views::definition::Measure::Plain(column)
        | views::definition::Measure::Bucket(_, column)
        | views::definition::Measure::Agg(_, Some(column)) => Some(column.as_str()),
        views::definition::Measure::Agg(_, None) => None,
    });
    let filtered = definition
        .filter
        .as_ref()
        .map(Filter::columns)
        .unwrap_or_default();
    match named.chain(filtered).find(|c| source.column(c).is_none()) {
        Some(unknown) => Err(FieldError::new(
            format!("{path}.columns"),
            format!(
                "{unknown} is not a column of {}.{}",
                definition.schema, definition.table
            ),
        )
        .into()),
        None => Ok(()),
    }
}

async fn put_dashboard(
    txn: &DatabaseTransaction,
    dashboard: &Dashboard,
    path: &str,
    dry: bool,
    memo: &Memo,
) -> Result<(), StoreError> {
    let slug = kernel::validate::slug(&dashboard.slug, "slug").map_err(|e| at(path, e))?;
    let name =
        kernel::validate::short_text(&dashboard.name, "name", 200).map_err(|e| at(path, e))?;
    let mut widgets = Vec::with_capacity(dashboard.widgets.len());
    let mut views = Vec::with_capacity(dashboard.widgets.len());
    for (i, widget) in dashboard.widgets.iter().enumerate() {
        let mut widget = widget.clone();
        views.push(widget["dataView"].as_str().unwrap_or_default().to_owned());
        if let Some(fields) = widget.as_object_mut()
            && let Some(view) = fields.remove("dataView")
        {
            let id = id_of(
                txn,
                DATAVIEW_ID,
                view.as_str().unwrap_or_default(),
                &format!("{path}.widgets[{i}].dataView"),
            )
            .await?;
            fields.insert("dataViewId".into(), Json::String(id.to_string()));
        }
        widgets.push(widget);
    }
    let widgets = Json::Array(widgets);
    let parsed = views::dashboard::parse_widgets(Some(&widgets)).map_err(|e| at(path, e))?;
    for (i, widget) in parsed.iter().enumerate() {
        let slug = views.get(i).map_or("", String::as_str);
        let outputs = view_outputs(txn, memo, slug).await?.unwrap_or_default();
        widget.check_columns(i, &outputs).map_err(|e| at(path, e))?;
    }
    if dashboard
        .refresh_seconds
        .is_some_and(|s| !(5..=86_400).contains(&s))
    {
        return Err(
            FieldError::new(format!("{path}.refreshSeconds"), "must be from 5 to 86400").into(),
        );
    }
    let refresh = dashboard
        .refresh_seconds
        .map(|s| i32::try_from(s).unwrap_or(i32::MAX));
    let on_taken = if dry {
        "DO NOTHING"
    } else {
        "DO UPDATE SET name = EXCLUDED.name, refresh_seconds = EXCLUDED.refresh_seconds, widgets = EXCLUDED.widgets, updated_at = now()"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.dashboards (id, slug, name, refresh_seconds, widgets, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, now(), now()) ON CONFLICT (slug) {on_taken}"
        ),
        vec![new_id().into(), slug.into(), name.into(), refresh.into(), widgets.into()],
    )
    .await
    .map_err(within(path))?;
    Ok(())
}

/// Ids and table columns found during a run of grant steps; in a diff,
/// what earlier steps would change in rows that exist (a diff changes
/// none): settings, and DataViews' output columns.
#[derive(Default)]
pub(super) struct Memo {
    ids: std::collections::HashMap<(&'static str, String), Uuid>,
    columns: std::collections::HashMap<String, Vec<String>>,
    /// Settings as a diff's earlier steps would set them.
    settings: Map<String, Json>,
    /// DataViews (by slug) with the output columns a diff's earlier steps
    /// give them.
    view_columns: std::collections::HashMap<String, Vec<String>>,
}

impl Memo {
    /// Forgets the ids and columns found, which any step but a grant may
    /// change.
    fn forget_lookups(&mut self) {
        self.ids.clear();
        self.columns.clear();
    }

    async fn id(
        &mut self,
        txn: &DatabaseTransaction,
        sql: &'static str,
        name: &str,
        path: &str,
    ) -> Result<Uuid, StoreError> {
        if let Some(id) = self.ids.get(&(sql, name.to_owned())) {
            return Ok(*id);
        }
        let id = id_of(txn, sql, name, path).await?;
        self.ids.insert((sql, name.to_owned()), id);
        Ok(id)
    }

    async fn columns(
        &mut self,
        txn: &DatabaseTransaction,
        resource: &str,
        path: &str,
    ) -> Result<Vec<String>, StoreError> {
        if let Some(columns) = self.columns.get(resource) {
            return Ok(columns.clone());
        }
        let (schema, table) = resource.split_once('.').unwrap_or_default();
        let columns: Vec<String> = facts(txn, schema, table)
            .await
            .map_err(|_| FieldError::new(format!("{path}.resource"), "names no table"))?
            .columns
            .into_iter()
            .map(|c| c.name)
            .collect();
        self.columns.insert(resource.to_owned(), columns.clone());
        Ok(columns)
    }
}

/// A grant checked as the grants route checks it, with ids for names, as
/// the row [`create_grants`] inserts.
async fn checked_grant(
    txn: &DatabaseTransaction,
    grant: &Grant,
    path: &str,
    memo: &mut Memo,
) -> Result<Json, StoreError> {
    let role = memo
        .id(txn, ROLE_ID, &grant.role, &format!("{path}.role"))
        .await?;
    let resource = match &grant.resource {
        Some(r) => Some(
            memo.id(txn, RESOURCE_ID, r, &format!("{path}.resource"))
                .await?,
        ),
        None => None,
    };
    let workflow = match &grant.workflow {
        Some(w) => Some(
            memo.id(txn, WORKFLOW_ID, w, &format!("{path}.workflow"))
                .await?,
        ),
        None => None,
    };
    let data_view = match &grant.data_view {
        Some(v) => Some(
            memo.id(txn, DATAVIEW_ID, v, &format!("{path}.dataView"))
                .await?,
        ),
        None => None,
    };
    let known: Option<Vec<String>> = match (&grant.resource, &grant.data_view) {
        (Some(resource), _) => Some(memo.columns(txn, resource, path).await?),
        (None, Some(view)) => view_outputs(txn, memo, view).await?,
        _ => None,
    };
    if let Some(filter) = &grant.filter {
        let parsed = Filter::parse(filter, "filter").map_err(|e| at(path, e))?;
        let known = known.as_deref().ok_or_else(|| {
            FieldError::new(
                format!("{path}.filter"),
                "workflow grants take no row filter",
            )
        })?;
        if let Some(unknown) = parsed
            .columns()
            .into_iter()
            .find(|c| !known.iter().any(|k| k == c))
        {
            return Err(FieldError::new(
                format!("{path}.filter"),
                format!("{unknown} is not a column of the table or view"),
            )
            .into());
        }
    }
    if let Some(columns) = &grant.columns {
        let table_columns = known
            .as_deref()
            .filter(|_| grant.resource.is_some())
            .ok_or_else(|| {
                FieldError::new(format!("{path}.columns"), "only table grants take columns")
            })?;
        if let Some((i, _)) = columns
            .iter()
            .enumerate()
            .find(|(_, c)| !table_columns.contains(c))
        {
            return Err(FieldError::new(
                format!("{path}.columns[{i}]"),
                "is not a column of the table",
            )
            .into());
        }
    }
    let fits = match (&grant.resource, &grant.workflow, &grant.data_view) {
        (Some(_), None, None) => {
            ["read", "create", "update", "delete"].contains(&grant.action.as_str())
        }
        (None, Some(_), None) => grant.action == "invoke",
        (None, None, Some(_)) => grant.action == "read",
        _ => {
            return Err(FieldError::new(
                path.to_owned(),
                "names exactly one of resource, workflow and dataView",
            )
            .into());
        }
    };
    if !fits {
        return Err(FieldError::new(
            format!("{path}.action"),
            "does not fit the grant's target (read, create, update or delete a table; invoke a workflow; read a DataView)",
        )
        .into());
    }
    Ok(serde_json::json!({
        "id": new_id(), "role": role, "resource": resource, "workflow": workflow, "dataView": data_view,
        "action": grant.action, "filter": grant.filter, "columns": grant.columns,
    }))
}

/// Checks grants and inserts them in one statement.
pub(super) async fn create_grants(
    txn: &DatabaseTransaction,
    grants: &[(&Grant, &str)],
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let mut rows = Vec::with_capacity(grants.len());
    for (grant, path) in grants {
        rows.push(checked_grant(txn, grant, path, memo).await?);
    }
    execute(
        txn,
        "INSERT INTO svc.grants (id, role_id, resource_id, workflow_id, data_view_id, action, filter, columns) \
         SELECT (g ->> 'id')::uuid, (g ->> 'role')::uuid, (g ->> 'resource')::uuid, (g ->> 'workflow')::uuid, \
                (g ->> 'dataView')::uuid, g ->> 'action', nullif(g -> 'filter', 'null'::jsonb), \
                CASE WHEN jsonb_typeof(g -> 'columns') = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(g -> 'columns')) END \
         FROM jsonb_array_elements($1) AS g",
        vec![Json::Array(rows).into()],
    )
    .await?;
    Ok(())
}

/// The settings stored, with a diff's earlier steps' values over them.
async fn current_settings(txn: &DatabaseTransaction, memo: &Memo) -> Result<Settings, StoreError> {
    let mut stored: Map<String, Json> = txn
        .query_all_raw(stmt("SELECT key, value FROM svc.settings", []))
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok((
                rows::column::<String>(r, "key")?,
                rows::column::<Json>(r, "value")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    stored.extend(memo.settings.clone());
    Ok(Settings::from_stored(stored))
}

async fn set_setting(
    txn: &DatabaseTransaction,
    key: &str,
    value: &Json,
    dry: bool,
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let path = format!("settings.{key}");
    if kernel::settings::session_only(key) {
        return Err(FieldError::new(
            path,
            "changes only through PATCH /admin/api/settings, by an administrator signed in with a session",
        )
        .into());
    }
    let value = if key == "auth.registration_role_id" && !value.is_null() {
        let role = id_of(txn, ROLE_ID, value.as_str().unwrap_or_default(), &path).await?;
        Json::String(role.to_string())
    } else {
        value.clone()
    };
    let current = current_settings(txn, memo).await?;
    let mut body = Map::new();
    body.insert(key.to_owned(), value);
    let patch = SettingsPatch::parse(&body, &current)
        .map_err(|e| FieldError::new(format!("settings.{}", e.field), e.message))?;
    if dry {
        memo.settings.extend(patch.values);
        return Ok(());
    }
    for (key, value) in patch.values {
        execute(
            txn,
            "INSERT INTO svc.settings (key, value, updated_at) VALUES ($1, $2, now()) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
            vec![key.into(), value.into()],
        )
        .await?;
    }
    Ok(())
}
