//! The eight tools: their JSON schemas, derived from the tables and
//! DataViews the caller may use, and their calls, each the service call of
//! the route it mirrors.

use std::sync::Arc;

use data::{ListParams, Page, Table};
use permissions::{Access, Action, Principal};
use rmcp::model::Tool;
use serde_json::{Map, Value, json};
use workflows::model::WebhookMethod;
use workflows::{WebhookAnswer, WebhookCall};

use crate::{McpCaller, McpServer, ToolError};

/// Tables the caller may `action` on (exposed for it, and granted).
fn tables_for<'t>(
    tables: &'t [Arc<Table>],
    principal: &Principal,
    action: Action,
) -> Vec<&'t Table> {
    let method = match action {
        Action::Read => "GET",
        Action::Create => "POST",
        Action::Update => "PATCH",
        Action::Delete => "DELETE",
        Action::Invoke => return Vec::new(),
    };
    tables
        .iter()
        .filter(|t| t.exposes(method) && Access::evaluate(principal, &t.scopes, action).is_ok())
        .map(AsRef::as_ref)
        .collect()
}

fn qualified(table: &Table) -> String {
    format!("{}.{}", table.schema, table.name)
}

/// `{ "type": "string", "enum": [...] }`, or a plain string when nothing is listed.
fn one_of(names: Vec<String>, description: &str) -> Value {
    if names.is_empty() {
        json!({ "type": "string", "description": description })
    } else {
        json!({ "type": "string", "enum": names, "description": description })
    }
}

fn schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let mut object = Map::new();
    object.insert("type".into(), json!("object"));
    object.insert("properties".into(), properties);
    object.insert("required".into(), json!(required));
    Arc::new(object)
}

const KEY: &str =
    "The row's primary key, as in the Data API's row path (composite keys joined with commas)";
const SELECT: &str = "Columns to answer, comma-separated (default: all you may read); related rows as alias:fk_column(columns) for the row a foreign key points at, alias:schema.table!fk_column(columns) for the rows pointing here, nested up to 3 deep";
const FILTER: &str = "A filter in Tessera's filter language, e.g. {\"and\": [{\"status\": {\"eq\": \"open\"}}, {\"total\": {\"gt\": 10}}]}";

/// The tools, their arguments naming what `caller` may use.
pub(crate) async fn list(server: &McpServer, caller: &McpCaller) -> Result<Vec<Tool>, ToolError> {
    let tables = server.data.tables().await?;
    let principal = &caller.principal;
    let resources = |action| {
        tables_for(&tables, principal, action)
            .into_iter()
            .map(qualified)
            .collect::<Vec<_>>()
    };
    let resource = |action, what| one_of(resources(action), what);
    let views = readable_views(server, principal).await?;
    let view_slugs = views
        .iter()
        .map(|v| v["slug"].as_str().unwrap_or_default().to_owned())
        .collect();
    Ok(vec![
        Tool::new(
            "list_resources",
            "The tables (\"schema.table\", with the methods and columns you may use) and DataViews you may read",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "query_rows",
            "Rows of a table, as GET /api/data/{schema}/{table}: filter, sort, select (with related rows), aggregate and groupBy, limit, offset",
            schema(
                json!({
                    "resource": resource(Action::Read, "The table, \"schema.table\""),
                    "filter": { "type": "object", "description": FILTER },
                    "sort": { "type": "string", "description": "Columns to sort by, comma-separated; a leading - sorts descending, e.g. \"-created_at,id\"" },
                    "select": { "type": "string", "description": SELECT },
                    "aggregate": { "type": "string", "description": "Aggregates instead of rows, alias:fn(column) comma-separated with fn count, sum, avg, min or max, e.g. \"n:count(),total:sum(amount)\" (not with select)" },
                    "groupBy": { "type": "string", "description": "With aggregate: columns to group by, comma-separated (one answer row per group)" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many rows (default 100)" },
                    "offset": { "type": "integer", "minimum": 0, "description": "Rows to skip" }
                }),
                &["resource"],
            ),
        ),
        Tool::new(
            "get_row",
            "One row by its primary key, as GET /api/data/{schema}/{table}/{pk}",
            schema(
                json!({
                    "resource": resource(Action::Read, "The table, \"schema.table\""),
                    "id": { "type": ["string", "integer"], "description": KEY },
                    "select": { "type": "string", "description": SELECT }
                }),
                &["resource", "id"],
            ),
        ),
        Tool::new(
            "insert_row",
            "Inserts a row (an object) or rows (an array), as POST /api/data/{schema}/{table}",
            schema(
                json!({
                    "resource": resource(Action::Create, "The table, \"schema.table\""),
                    "data": { "type": ["object", "array"], "description": "Column names and values" }
                }),
                &["resource", "data"],
            ),
        ),
        Tool::new(
            "update_row",
            "Changes columns of a row, as PATCH /api/data/{schema}/{table}/{pk}",
            schema(
                json!({
                    "resource": resource(Action::Update, "The table, \"schema.table\""),
                    "id": { "type": ["string", "integer"], "description": KEY },
                    "data": { "type": "object", "description": "The columns to change and their new values" }
                }),
                &["resource", "id", "data"],
            ),
        ),
        Tool::new(
            "delete_row",
            "Deletes a row, as DELETE /api/data/{schema}/{table}/{pk}",
            schema(
                json!({
                    "resource": resource(Action::Delete, "The table, \"schema.table\""),
                    "id": { "type": ["string", "integer"], "description": KEY }
                }),
                &["resource", "id"],
            ),
        ),
        Tool::new(
            "query_dataview",
            "Rows of a published DataView, as GET /api/views/{slug}",
            schema(
                json!({
                    "slug": one_of(view_slugs, "The DataView's slug"),
                    "filter": { "type": "object", "description": FILTER },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000 },
                    "offset": { "type": "integer", "minimum": 0 }
                }),
                &["slug"],
            ),
        ),
        Tool::new(
            "invoke_workflow",
            "Calls a workflow's POST webhook with a JSON body, as POST /api/workflows/{slug}/webhook; answers the run's outcome, or its id when it runs on",
            schema(
                json!({
                    "slug": { "type": "string", "description": "The workflow's slug" },
                    "body": { "type": ["object", "array"], "description": "The webhook's body (default {})" }
                }),
                &["slug"],
            ),
        ),
    ])
}

/// The published DataViews the caller may read: `{ slug, name, columns }`.
async fn readable_views(
    server: &McpServer,
    principal: &Principal,
) -> Result<Vec<Value>, ToolError> {
    Ok(server
        .views
        .published()
        .await?
        .iter()
        .filter(|view| Access::evaluate(principal, &view.scopes, Action::Read).is_ok())
        .map(|view| {
            json!({
                "slug": view.slug,
                "name": view.name,
                "columns": columns(&view.shape),
            })
        })
        .collect())
}

fn columns(table: &Table) -> Value {
    table
        .columns
        .iter()
        .map(|c| json!({ "name": c.name, "type": c.sql_type, "nullable": c.nullable }))
        .collect()
}

/// The names of the tools `list` answers; a call naming another is a
/// JSON-RPC error (invalid params), as the MCP specification says.
pub(crate) const NAMES: [&str; 8] = [
    "list_resources",
    "query_rows",
    "get_row",
    "insert_row",
    "update_row",
    "delete_row",
    "query_dataview",
    "invoke_workflow",
];

/// Runs the tool `tool` with `arguments`; answers the text of its result,
/// refused (INVALID_QUERY) past `data.max_answer_bytes` like any answer.
pub(crate) async fn call(
    server: &McpServer,
    caller: &McpCaller,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Result<String, ToolError> {
    let text = run(server, caller, tool, arguments).await?;
    if text.len() as u64 > server.data.max_answer_bytes().await? {
        return Err(kernel::StoreError::AnswerTooLarge.into());
    }
    Ok(text)
}

async fn run(
    server: &McpServer,
    caller: &McpCaller,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Result<String, ToolError> {
    let request = caller.request();
    match tool {
        "list_resources" => list_resources(server, caller).await,
        "query_rows" => {
            let (schema, table) = resource(arguments)?;
            let page = server
                .data
                .list(request, schema, table, &list_params(arguments)?)
                .await?;
            Ok(page_text(&page))
        }
        "get_row" => {
            let (schema, table) = resource(arguments)?;
            Ok(server
                .data
                .get(
                    request,
                    (schema, table),
                    &key(arguments)?,
                    arguments.get("select").and_then(Value::as_str),
                )
                .await?)
        }
        "insert_row" => {
            let (schema, table) = resource(arguments)?;
            let body = arguments
                .get("data")
                .filter(|d| d.is_object() || d.is_array())
                .ok_or_else(|| {
                    ToolError::argument("data", "must be an object or an array of objects")
                })?;
            Ok(server.data.create(request, schema, table, body).await?)
        }
        "update_row" => {
            let (schema, table) = resource(arguments)?;
            let body = arguments
                .get("data")
                .filter(|d| d.is_object())
                .ok_or_else(|| ToolError::argument("data", "must be an object of columns"))?;
            Ok(server
                .data
                .update(request, schema, table, &key(arguments)?, body)
                .await?)
        }
        "delete_row" => {
            let (schema, table) = resource(arguments)?;
            server
                .data
                .delete(request, schema, table, &key(arguments)?)
                .await?;
            Ok(json!({ "deleted": true }).to_string())
        }
        "query_dataview" => {
            let slug = text(arguments, "slug")?;
            let page = server
                .views
                .read(request, slug, &list_params(arguments)?)
                .await?;
            Ok(page_text(&page))
        }
        "invoke_workflow" => invoke(server, caller, arguments).await,
        other => Err(ToolError(format!("NOT_FOUND: no tool named {other}"))),
    }
}

async fn list_resources(server: &McpServer, caller: &McpCaller) -> Result<String, ToolError> {
    // The caller was resolved by this request's route.
    let principal = &caller.principal;
    let tables = server.data.tables().await?;
    let mut listed: Vec<Value> = Vec::new();
    for table in tables.iter().filter(|t| !t.exposed_methods.is_empty()) {
        let methods: Vec<&str> = [
            (Action::Read, "GET"),
            (Action::Create, "POST"),
            (Action::Update, "PATCH"),
            (Action::Delete, "DELETE"),
        ]
        .into_iter()
        .filter(|(action, method)| {
            table.exposes(method) && Access::evaluate(principal, &table.scopes, *action).is_ok()
        })
        .map(|(_, method)| method)
        .collect();
        if methods.is_empty() {
            continue;
        }
        let readable = Access::evaluate(principal, &table.scopes, Action::Read).ok();
        let shown: Vec<Value> = table
            .columns
            .iter()
            .filter(|c| {
                readable
                    .as_ref()
                    .is_none_or(|access| access.covers(&c.name))
            })
            .map(|c| json!({ "name": c.name, "type": c.sql_type, "nullable": c.nullable }))
            .collect();
        listed.push(json!({
            "resource": qualified(table),
            "methods": methods,
            "columns": shown,
        }));
    }
    let views = readable_views(server, principal).await?;
    Ok(json!({ "tables": listed, "dataviews": views }).to_string())
}

async fn invoke(
    server: &McpServer,
    caller: &McpCaller,
    arguments: &Map<String, Value>,
) -> Result<String, ToolError> {
    let slug = text(arguments, "slug")?;
    let body = match arguments.get("body") {
        None | Some(Value::Null) => json!({}),
        Some(body) if body.is_object() || body.is_array() => body.clone(),
        Some(_) => return Err(ToolError::argument("body", "must be an object or an array")),
    };
    let bytes = body.to_string().into_bytes();
    let call = WebhookCall {
        slug,
        method: WebhookMethod::Post,
        bearer: Some(&caller.bearer),
        query: Map::new(),
        body: Some(&bytes),
        headers: Map::new(),
        ip: caller.ip.clone().unwrap_or_default(),
    };
    match server.workflows.invoke(call).await? {
        WebhookAnswer::Started(run) => Ok(json!({ "run": run, "status": "RUNNING" }).to_string()),
        WebhookAnswer::Finished(outcome) => {
            serde_json::to_string(&outcome).map_err(|e| ToolError(format!("INTERNAL: {e}")))
        }
    }
}

fn text<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::argument(name, "is required and must be a string"))
}

/// `resource` as (schema, table).
fn resource(arguments: &Map<String, Value>) -> Result<(&str, &str), ToolError> {
    text(arguments, "resource")?
        .split_once('.')
        .ok_or_else(|| ToolError::argument("resource", "must be \"schema.table\""))
}

/// `id` as the row path takes it.
fn key(arguments: &Map<String, Value>) -> Result<String, ToolError> {
    match arguments.get("id") {
        Some(Value::String(id)) => Ok(id.clone()),
        Some(Value::Number(id)) => Ok(id.to_string()),
        _ => Err(ToolError::argument(
            "id",
            "is required: a string or an integer",
        )),
    }
}

/// The list route's parameters from the arguments (strings or JSON).
fn list_params(arguments: &Map<String, Value>) -> Result<ListParams, ToolError> {
    let as_text = |name: &str| -> Result<Option<String>, ToolError> {
        match arguments.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Array(items)) if name != "filter" => Ok(Some(
                items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| ToolError::argument(name, "must hold strings"))
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .join(","),
            )),
            Some(object @ Value::Object(_)) if name == "filter" => Ok(Some(object.to_string())),
            Some(_) => Err(ToolError::argument(name, "has the wrong type")),
        }
    };
    Ok(ListParams {
        select: as_text("select")?,
        filter: as_text("filter")?,
        sort: as_text("sort")?,
        limit: as_text("limit")?,
        offset: as_text("offset")?,
        count: None,
        aggregate: as_text("aggregate")?,
        group_by: as_text("groupBy")?,
    })
}

fn page_text(page: &Page) -> String {
    format!(
        "{{\"rows\":{},\"limit\":{},\"offset\":{}}}",
        page.rows, page.limit, page.offset
    )
}
