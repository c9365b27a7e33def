//! The catalog of resources: columns, key and grants of every registered
//! table, and the published DataViews with their grants, cached per
//! instance and loaded again when its version moves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use data::{Column, Kind, Table, service_columns};
use kernel::StoreError;
use permissions::{Action, Scope};
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement};
use serde_json::Value;
use uuid::Uuid;
use views::definition::Definition;
use views::store::PublishedView;

use crate::{PgStore, map_err};

/// Every registered table that exists, by schema and name, and every
/// published DataView, by slug and by id.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(super) schemas: HashMap<String, HashMap<String, Arc<Table>>>,
    pub(super) views: HashMap<String, Arc<PublishedView>>,
    pub(super) view_ids: HashMap<Uuid, Arc<PublishedView>>,
}

/// Published DataViews with their read grants.
const VIEWS_SQL: &str = "SELECT v.id, v.slug, v.name, v.published, \
    (SELECT json_agg(json_build_object('roleId', g.role_id, 'action', g.action, 'filter', g.filter)) \
     FROM svc.grants g WHERE g.data_view_id = v.id) AS grants \
    FROM svc.dataviews v WHERE v.published IS NOT NULL";

/// Resources with their columns (from the catalog), primary key and grants.
const CATALOG_SQL: &str = "SELECT r.id, r.schema_name, r.table_name, r.exposed_methods, r.check_messages, \
    (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), \
        'typname', t.typname, 'category', t.typcategory, 'nullable', NOT a.attnotnull, \
        'hasDefault', a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', \
        'writable', a.attidentity <> 'a' AND a.attgenerated = '') ORDER BY a.attnum) \
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns, \
    (SELECT json_agg(a.attname ORDER BY k.ord) FROM pg_index i \
        CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = c.oid AND i.indisprimary) AS key, \
    (SELECT json_agg(json_build_object('roleId', g.role_id, 'action', g.action, 'filter', g.filter, 'columns', g.columns)) \
     FROM svc.grants g WHERE g.resource_id = r.id) AS grants \
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
            .query_all_raw(Statement::from_string(DbBackend::Postgres, CATALOG_SQL))
            .await
            .map_err(map_err)?;
        let mut catalog = Catalog::default();
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
            .query_all_raw(Statement::from_string(DbBackend::Postgres, VIEWS_SQL))
            .await
            .map_err(map_err)?;
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

fn table_of(row: &QueryResult, version: i64) -> Result<Option<Table>, StoreError> {
    let schema: String = row.try_get("", "schema_name").map_err(map_err)?;
    let name: String = row.try_get("", "table_name").map_err(map_err)?;
    let Some(shown) = service_columns(&schema, &name) else {
        return Ok(None);
    };
    let raw_columns: Option<Value> = row.try_get("", "columns").map_err(map_err)?;
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
                kind: Kind::classify(text("typname"), text("category")),
                nullable: flag("nullable"),
                has_default: flag("hasDefault"),
                writable: flag("writable"),
            })
        })
        .collect();
    let key_names: Option<Value> = row.try_get("", "key").map_err(map_err)?;
    let key_names: Vec<&str> = key_names
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let key: Vec<usize> = key_names
        .iter()
        .map(|k| columns.iter().position(|c| c.name == *k))
        .collect::<Option<_>>()
        .unwrap_or_default();
    let messages: Value = row.try_get("", "check_messages").map_err(map_err)?;
    let check_messages: BTreeMap<String, String> =
        serde_json::from_value(messages).unwrap_or_default();
    let grants: Option<Value> = row.try_get("", "grants").map_err(map_err)?;
    let scopes = grants
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(scope_of)
        .collect();
    Ok(Some(Table {
        resource_id: row.try_get("", "id").map_err(map_err)?,
        schema,
        name,
        exposed_methods: row.try_get("", "exposed_methods").map_err(map_err)?,
        columns,
        key,
        check_messages,
        scopes,
        version,
    }))
}

/// A published view with its source in `catalog`; `None` when its snapshot
/// no longer parses, its source is gone or no longer fits it (it serves
/// nothing until published again).
fn view_of(row: &QueryResult, catalog: &Catalog) -> Result<Option<PublishedView>, StoreError> {
    let published: Value = row.try_get("", "published").map_err(map_err)?;
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
    let grants: Option<Value> = row.try_get("", "grants").map_err(map_err)?;
    Ok(Some(PublishedView {
        id: row.try_get("", "id").map_err(map_err)?,
        slug: row.try_get("", "slug").map_err(map_err)?,
        name: row.try_get("", "name").map_err(map_err)?,
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
