//! The configuration read as a snapshot, ids turned into names.

use std::collections::{BTreeMap, BTreeSet};

use kernel::StoreError;
use kernel::settings::Settings;
use schema::TableInfo;
use sea_orm::{ConnectionTrait, FromQueryResult};
use serde_json::{Map, Value as Json};
use snapshot::{
    Dashboard, DataView, Function, Grant, Index, Resource, Role, Snapshot, Table, Workflow,
};
use uuid::Uuid;

use crate::query::Query;
use crate::schema_store::TableRow;
use crate::schema_store::describe::TABLES_SQL;
use crate::{rows, stmt};

/// Schemas whose tables a snapshot never carries.
fn reserved(schema: &str) -> bool {
    schema == "svc" || schema == "information_schema" || schema.starts_with("pg_")
}

async fn all<T: FromQueryResult>(
    conn: &impl ConnectionTrait,
    sql: &str,
) -> Result<Vec<T>, StoreError> {
    conn.fetch_all(stmt(sql, []))
        .await?
        .iter()
        .map(rows::row::<T>)
        .collect()
}

#[derive(FromQueryResult)]
struct ResourceRow {
    schema_name: String,
    table_name: String,
    exposed_methods: Vec<String>,
}

#[derive(FromQueryResult)]
struct FunctionRow {
    schema_name: String,
    function_name: String,
    exposed_methods: Vec<String>,
}

#[derive(FromQueryResult)]
struct RoleRow {
    name: String,
    description: Option<String>,
    api_access: bool,
}

#[derive(FromQueryResult)]
struct GrantRow {
    role: String,
    resource: Option<String>,
    workflow: Option<String>,
    data_view: Option<String>,
    function: Option<String>,
    action: String,
    filter: Option<Json>,
    columns: Option<Vec<String>>,
}

#[derive(FromQueryResult)]
struct WorkflowRow {
    slug: String,
    name: String,
    enabled: bool,
    draft: Json,
    published: Option<Json>,
}

#[derive(FromQueryResult)]
struct DataViewRow {
    slug: String,
    name: String,
    draft: Json,
    published: Option<Json>,
}

#[derive(FromQueryResult)]
struct DashboardRow {
    slug: String,
    name: String,
    refresh_seconds: Option<i32>,
    widgets: Json,
}

#[derive(FromQueryResult)]
struct Named {
    id: Uuid,
    name: String,
}

/// Id -> name of users (by email), resources (`schema.table`), DataViews
/// (slug) and roles (name).
pub(crate) struct Names {
    users: BTreeMap<Uuid, String>,
    resources: BTreeMap<Uuid, String>,
    dataviews: BTreeMap<Uuid, String>,
    roles: BTreeMap<Uuid, String>,
}

impl Names {
    async fn read(conn: &impl ConnectionTrait) -> Result<Self, StoreError> {
        let map = |rows: Vec<Named>| rows.into_iter().map(|n| (n.id, n.name)).collect();
        Ok(Self {
            users: map(all(conn, "SELECT id, email AS name FROM svc.users").await?),
            resources: map(all(
                conn,
                "SELECT id, schema_name || '.' || table_name AS name FROM svc.resources",
            )
            .await?),
            dataviews: map(all(conn, "SELECT id, slug AS name FROM svc.dataviews").await?),
            roles: map(all(conn, "SELECT id, name FROM svc.roles").await?),
        })
    }

    fn of(map: &BTreeMap<Uuid, String>, id: &Json) -> Json {
        id.as_str()
            .and_then(|s| s.parse::<Uuid>().ok())
            .and_then(|id| map.get(&id))
            .map_or(Json::Null, |name| Json::String(name.clone()))
    }

    /// A `{ trigger, steps }` with `executeAs` as an email, a dbEvent's
    /// `resourceId` as `resource: schema.table`, and no secret (API.md 17).
    fn definition(&self, mut definition: Json) -> Json {
        workflows::redact_secrets(&mut definition);
        if let Some(trigger) = definition.get_mut("trigger").and_then(Json::as_object_mut) {
            if let Some(user) = trigger.get("executeAs").cloned() {
                trigger.insert("executeAs".into(), Self::of(&self.users, &user));
            }
            if let Some(resource) = trigger.remove("resourceId") {
                trigger.insert("resource".into(), Self::of(&self.resources, &resource));
            }
        }
        definition
    }
}

/// Tables of application schemas that are resources, with their indexes but
/// those that back a primary key or unique constraint.
async fn tables(
    conn: &impl ConnectionTrait,
    resources: &[Resource],
) -> Result<Vec<Table>, StoreError> {
    let registered: BTreeSet<String> = resources.iter().map(Resource::qualified).collect();
    let schemas: BTreeSet<&str> = resources
        .iter()
        .map(|r| r.schema.as_str())
        .filter(|s| !reserved(s))
        .collect();
    #[derive(FromQueryResult)]
    struct Backing {
        name: String,
    }
    let backing: BTreeSet<String> = all::<Backing>(
        conn,
        "SELECT n.nspname || '.' || c.relname AS name FROM pg_constraint k \
         JOIN pg_class c ON c.oid = k.conindid JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE k.contype IN ('p', 'u')",
    )
    .await?
    .into_iter()
    .map(|b| b.name)
    .collect();
    let mut tables = Vec::new();
    for schema in schemas {
        let only: Option<String> = None;
        let found = conn
            .fetch_all(stmt(TABLES_SQL, [schema.into(), only.into()]))
            .await?;
        for row in &found {
            let info: TableInfo = rows::row::<TableRow>(row)?.into();
            if !registered.contains(&format!("{schema}.{}", info.name)) {
                continue;
            }
            let columns = serde_json::from_value(info.columns)
                .map_err(|e| StoreError::Internal(format!("a described column: {e}")))?;
            let mut indexes = Vec::new();
            for mut index in info.indexes.as_array().cloned().unwrap_or_default() {
                let name = index["name"].as_str().unwrap_or_default().to_owned();
                if backing.contains(&format!("{schema}.{name}")) {
                    continue;
                }
                if let Some(fields) = index.as_object_mut() {
                    fields.remove("valid");
                }
                let index: Index = serde_json::from_value(index)
                    .map_err(|e| StoreError::Internal(format!("a described index: {e}")))?;
                indexes.push(index);
            }
            tables.push(Table {
                schema: schema.to_owned(),
                name: info.name,
                columns,
                indexes,
            });
        }
    }
    Ok(tables)
}

/// Every setting but secrets and those only a signed-in administrator may
/// change, the registration role by name.
fn settings(stored: Map<String, Json>, names: &Names) -> BTreeMap<String, Json> {
    let mut view = Settings::from_stored(stored).public_view();
    view.retain(|key, _| !kernel::settings::session_only(key));
    if let Some(Json::Object(providers)) = view.get_mut("auth.oauth") {
        for provider in providers.values_mut() {
            if let Some(p) = provider.as_object_mut() {
                p.remove("clientSecret");
            }
        }
    }
    if let Some(role) = view.get("auth.registration_role_id").cloned() {
        view.insert(
            "auth.registration_role_id".into(),
            Names::of(&names.roles, &role),
        );
    }
    view.into_iter().collect()
}

/// The configuration readable on `conn` as a snapshot, sorted.
pub(crate) async fn export(conn: &impl ConnectionTrait) -> Result<Snapshot, StoreError> {
    let names = Names::read(conn).await?;
    let resources: Vec<Resource> = all::<ResourceRow>(
        conn,
        "SELECT schema_name, table_name, exposed_methods FROM svc.resources",
    )
    .await?
    .into_iter()
    .map(|r| Resource {
        schema: r.schema_name,
        table: r.table_name,
        exposed_methods: r.exposed_methods,
    })
    .collect();
    let tables = tables(conn, &resources).await?;
    let functions = all::<FunctionRow>(
        conn,
        "SELECT schema_name, function_name, exposed_methods FROM svc.functions",
    )
    .await?
    .into_iter()
    .map(|f| Function {
        schema: f.schema_name,
        function: f.function_name,
        exposed_methods: f.exposed_methods,
    })
    .collect();
    let roles = all::<RoleRow>(
        conn,
        "SELECT name, description, api_access FROM svc.roles WHERE NOT built_in",
    )
    .await?
    .into_iter()
    .map(|r| Role {
        name: r.name,
        description: r.description,
        api_access: r.api_access,
    })
    .collect();
    let grants = all::<GrantRow>(
        conn,
        "SELECT r.name AS role, res.schema_name || '.' || res.table_name AS resource, w.slug AS workflow, \
         v.slug AS data_view, f.schema_name || '.' || f.function_name AS function, g.action, g.filter, g.columns \
         FROM svc.grants g JOIN svc.roles r ON r.id = g.role_id \
         LEFT JOIN svc.resources res ON res.id = g.resource_id LEFT JOIN svc.workflows w ON w.id = g.workflow_id \
         LEFT JOIN svc.dataviews v ON v.id = g.data_view_id LEFT JOIN svc.functions f ON f.id = g.function_id",
    )
    .await?
    .into_iter()
    .map(|g| Grant {
        role: g.role,
        resource: g.resource,
        workflow: g.workflow,
        data_view: g.data_view,
        function: g.function,
        action: g.action,
        filter: g.filter,
        columns: g.columns,
    })
    .collect();
    let workflows = all::<WorkflowRow>(
        conn,
        "SELECT slug, name, enabled, draft, published FROM svc.workflows",
    )
    .await?
    .into_iter()
    .map(|w| Workflow {
        slug: w.slug,
        name: w.name,
        enabled: w.enabled,
        draft: names.definition(w.draft),
        published: w.published.map(|p| names.definition(p)),
    })
    .collect();
    let dataviews = all::<DataViewRow>(
        conn,
        "SELECT slug, name, draft, published FROM svc.dataviews",
    )
    .await?
    .into_iter()
    .map(|v| DataView {
        slug: v.slug,
        name: v.name,
        draft: v.draft,
        published: v.published,
    })
    .collect();
    let dashboards = all::<DashboardRow>(
        conn,
        "SELECT slug, name, refresh_seconds, widgets FROM svc.dashboards",
    )
    .await?
    .into_iter()
    .map(|d| Dashboard {
        slug: d.slug,
        name: d.name,
        refresh_seconds: d.refresh_seconds.map(i64::from),
        widgets: d
            .widgets
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut w| {
                if let Some(fields) = w.as_object_mut()
                    && let Some(view) = fields.remove("dataViewId")
                {
                    fields.insert("dataView".into(), Names::of(&names.dataviews, &view));
                }
                w
            })
            .collect(),
    })
    .collect();
    #[derive(FromQueryResult)]
    struct SettingRow {
        key: String,
        value: Json,
    }
    let stored = all::<SettingRow>(conn, "SELECT key, value FROM svc.settings")
        .await?
        .into_iter()
        .map(|s| (s.key, s.value))
        .collect();
    let mut snapshot = Snapshot {
        version: snapshot::VERSION,
        tables,
        resources,
        functions,
        roles,
        grants,
        workflows,
        dataviews,
        dashboards,
        settings: settings(stored, &names),
    };
    snapshot.sort();
    Ok(snapshot)
}
