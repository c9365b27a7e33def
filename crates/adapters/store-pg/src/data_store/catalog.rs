//! The catalog of resources: columns, key and grants of every registered
//! table, and the published DataViews with their grants, cached per
//! instance and loaded again when its version moves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use data::{Column, ForeignKey, Hook, Kind, Table, WriteEvent, service_columns};
use kernel::StoreError;
use permissions::{Action, Scope};
use sea_orm::{DbBackend, FromQueryResult, QueryResult, Statement};
use serde_json::Value;
use uuid::Uuid;
use views::definition::Definition;
use views::store::PublishedView;

use crate::query::Query;
use crate::{PgStore, rows};

/// Every registered table that exists, by schema and name, and every
/// published DataView, by slug and by id.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(super) schemas: HashMap<String, HashMap<String, Arc<Table>>>,
    pub(super) views: HashMap<String, Arc<PublishedView>>,
    pub(super) view_ids: HashMap<Uuid, Arc<PublishedView>>,
    /// The version it was read at.
    pub(super) version: i64,
    /// Registered functions called since it was read, by schema and name
    /// (read when first called; at most [`FUNCTIONS_MAX`]).
    pub(super) functions: std::sync::RwLock<HashMap<(String, String), Arc<data::Callable>>>,
}

/// Functions a catalog keeps described; past it, it starts over.
pub(super) const FUNCTIONS_MAX: usize = 1024;

/// Published DataViews with their read grants.
const VIEWS_SQL: &str = "SELECT v.id, v.slug, v.name, v.published, \
    (SELECT json_agg(json_build_object('roleId', g.role_id, 'action', g.action, 'filter', g.filter)) \
     FROM svc.grants g WHERE g.data_view_id = v.id) AS grants \
    FROM svc.dataviews v WHERE v.published IS NOT NULL";

/// Resources with their columns (from the catalog), primary key, single-column
/// foreign keys, unique keys (no partial or expression index) and grants.
const CATALOG_SQL: &str = "SELECT r.id, r.schema_name, r.table_name, r.exposed_methods, r.check_messages, \
    (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), \
        'inputType', format_type(a.atttypid, -1), \
        'typname', t.typname, 'category', t.typcategory, 'nullable', NOT a.attnotnull, \
        'hasDefault', a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', \
        'writable', a.attidentity <> 'a' AND a.attgenerated = '') ORDER BY a.attnum) \
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns, \
    (SELECT json_agg(a.attname ORDER BY k.ord) FROM pg_index i \
        CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = c.oid AND i.indisprimary) AS key, \
    (SELECT json_agg(json_build_object('column', a.attname, 'schema', fn.nspname, 'table', fc.relname, \
        'references', fa.attname)) \
     FROM pg_constraint k \
     JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] \
     JOIN pg_class fc ON fc.oid = k.confrelid JOIN pg_namespace fn ON fn.oid = fc.relnamespace \
     JOIN pg_attribute fa ON fa.attrelid = k.confrelid AND fa.attnum = k.confkey[1] \
     WHERE k.conrelid = c.oid AND k.contype = 'f' AND cardinality(k.conkey) = 1) AS foreign_keys, \
    (SELECT json_agg((SELECT json_agg(a.attname) FROM unnest(i.indkey) AS u(attnum) \
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum)) \
     FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL \
        AND i.indexprs IS NULL AND i.indimmediate AND i.indisvalid) AS unique_keys, \
    (SELECT json_agg(json_build_object('roleId', g.role_id, 'action', g.action, 'filter', g.filter, 'columns', g.columns)) \
     FROM svc.grants g WHERE g.resource_id = r.id) AS grants, \
    (SELECT json_agg(json_build_object('id', w.id, 'slug', w.slug, \
        'events', w.published -> 'trigger' -> 'events', 'definition', w.published) ORDER BY w.slug) \
     FROM svc.workflows w WHERE w.enabled AND w.published -> 'trigger' ->> 'type' = 'beforeWrite' \
        AND w.published -> 'trigger' ->> 'resourceId' = r.id::text) AS hooks \
    FROM svc.resources r \
    JOIN pg_class c ON c.oid = to_regclass(quote_ident(r.schema_name) || '.' || quote_ident(r.table_name))";

impl PgStore {
    /// The catalog, loaded again when a round trip has seen a newer version.
    pub(super) async fn catalog(&self) -> Result<Arc<Catalog>, StoreError> {
        if let Some((cached, _)) = self.catalog.get(self.seen.catalog()) {
            return Ok(cached);
        }
        let version = self.read_versions().await?.catalog;
        let rows = self
            .db
            .fetch_all(Statement::from_string(DbBackend::Postgres, CATALOG_SQL))
            .await?;
        let mut catalog = Catalog {
            version,
            ..Catalog::default()
        };
        for row in rows {
            if let Some(table) = table_of(&row, version)? {
                catalog
                    .schemas
                    .entry(table.schema.clone())
                    .or_default()
                    .insert(table.name.clone(), Arc::new(table));
            }
        }
        let views = self
            .db
            .fetch_all(Statement::from_string(DbBackend::Postgres, VIEWS_SQL))
            .await?;
        for row in views {
            if let Some(view) = view_of(&row, &catalog)? {
                let view = Arc::new(view);
                catalog.view_ids.insert(view.id, view.clone());
                catalog.views.insert(view.slug.clone(), view);
            }
        }
        let catalog = Arc::new(catalog);
        self.catalog.put(catalog.clone(), version);
        Ok(catalog)
    }
}

/// A registered table as the catalog's statement reads it: its columns,
/// key, check messages and grants as JSON.
#[derive(FromQueryResult)]
struct TableRow {
    id: Uuid,
    schema_name: String,
    table_name: String,
    exposed_methods: Vec<String>,
    columns: Option<Value>,
    key: Option<Value>,
    foreign_keys: Option<Value>,
    unique_keys: Option<Value>,
    check_messages: Value,
    grants: Option<Value>,
    hooks: Option<Value>,
}

/// A published view as the catalog's statement reads it.
#[derive(FromQueryResult)]
struct ViewRow {
    id: Uuid,
    slug: String,
    name: String,
    published: Value,
    grants: Option<Value>,
}

fn table_of(row: &QueryResult, version: i64) -> Result<Option<Table>, StoreError> {
    let TableRow {
        id,
        schema_name: schema,
        table_name: name,
        exposed_methods,
        columns: raw_columns,
        key: key_names,
        foreign_keys,
        unique_keys,
        check_messages: messages,
        grants,
        hooks,
    } = rows::row(row)?;
    let Some(shown) = service_columns(&schema, &name) else {
        return Ok(None);
    };
    let columns: Vec<Column> = raw_columns
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
            let flag = |key: &str| c.get(key).and_then(Value::as_bool).unwrap_or(false);
            let name = text("name");
            if shown.is_some_and(|list| !list.contains(&name)) {
                return None;
            }
            Some(Column {
                name: name.to_owned(),
                sql_type: text("type").to_owned(),
                input_type: text("inputType").to_owned(),
                kind: Kind::classify(text("typname"), text("category")),
                nullable: flag("nullable"),
                has_default: flag("hasDefault"),
                writable: flag("writable"),
            })
        })
        .collect();
    // A key over a column the Data API does not show is no key of it.
    let positions = |names: &Value| -> Option<Vec<usize>> {
        names
            .as_array()?
            .iter()
            .map(|k| {
                columns
                    .iter()
                    .position(|c| Some(c.name.as_str()) == k.as_str())
            })
            .collect()
    };
    let key: Vec<usize> = key_names.as_ref().and_then(positions).unwrap_or_default();
    let unique_keys: Vec<Vec<usize>> = unique_keys
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(positions)
        .collect();
    let foreign_keys: Vec<ForeignKey> = foreign_keys
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|k| {
            let text = |key: &str| Some(k.get(key)?.as_str()?.to_owned());
            Some(ForeignKey {
                column: text("column")?,
                schema: text("schema")?,
                table: text("table")?,
                references: text("references")?,
            })
        })
        .filter(|k| columns.iter().any(|c| c.name == k.column))
        .collect();
    let check_messages: BTreeMap<String, String> =
        serde_json::from_value(messages).unwrap_or_default();
    let scopes = grants
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(scope_of)
        .collect();
    Ok(Some(Table {
        resource_id: id,
        schema,
        name,
        exposed_methods,
        columns,
        key,
        check_messages,
        scopes,
        foreign_keys,
        unique_keys,
        hooks: hooks
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(hook_of)
            .collect(),
        version,
    }))
}

/// A published `beforeWrite` workflow, as the catalog query lists it.
fn hook_of(hook: &Value) -> Option<Hook> {
    Some(Hook {
        workflow_id: hook.get("id")?.as_str()?.parse().ok()?,
        slug: hook.get("slug")?.as_str()?.to_owned(),
        events: hook
            .get("events")?
            .as_array()?
            .iter()
            .filter_map(|e| WriteEvent::parse(e.as_str()?))
            .collect(),
        definition: Arc::new(hook.get("definition")?.clone()),
    })
}

/// A published view with its source in `catalog`; `None` when its snapshot
/// no longer parses, its source is gone or no longer fits it (it serves
/// nothing until published again).
fn view_of(row: &QueryResult, catalog: &Catalog) -> Result<Option<PublishedView>, StoreError> {
    let ViewRow {
        id,
        slug,
        name,
        published,
        grants,
    } = rows::row(row)?;
    let Some(definition) = published
        .as_object()
        .and_then(|body| Definition::parse(body).ok())
    else {
        return Ok(None);
    };
    let Some(source) = catalog
        .schemas
        .get(&definition.schema)
        .and_then(|tables| tables.get(&definition.table))
    else {
        return Ok(None);
    };
    let Ok(shape) = definition.shape(source) else {
        return Ok(None);
    };
    Ok(Some(PublishedView {
        id,
        slug,
        name,
        source: source.clone(),
        shape,
        definition,
        scopes: grants
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(scope_of)
            .collect(),
    }))
}

/// A stored grant, as the catalog query lists it.
fn scope_of(grant: &Value) -> Option<Scope> {
    Scope::new(
        grant.get("roleId")?.as_str()?.parse().ok()?,
        Action::parse(grant.get("action")?.as_str()?)?,
        grant.get("filter"),
        match grant.get("columns") {
            Some(Value::Array(list)) => Some(
                list.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        },
    )
}
