//! The OpenAPI 3.1 document of the Data API as one role sees it.

use actix_web::{HttpResponse, get, web};
use api_types::ErrorEnvelope;
use data::{Column, Kind, LIMIT_DEFAULT, LIMIT_MAX, RoleView};
use kernel::{ADMINISTRATORS_ROLE_ID, Code};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller};

/// Which role's view to describe.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RoleQuery {
    /// The role id.
    role: Option<String>,
}

/// The Data API as the role sees it: only the exposed tables it has grants
/// on, only the methods it may use, only the columns it reaches; the
/// published DataViews it may read (grants on the view and its source) with
/// their output columns; the public webhooks and those it may invoke, with
/// the result route; the exposed database functions it may invoke.
#[utoipa::path(operation_id = "getDataDocument", tag = "data", security(("bearer" = [])), params(RoleQuery),
    responses((status = 200, description = "OpenAPI 3.1 document"), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[get("/openapi/data")]
pub async fn document(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    query: web::Query<RoleQuery>,
) -> Result<HttpResponse, ApiError> {
    let role_id: Uuid = query
        .role
        .as_deref()
        .ok_or_else(|| ApiError::field(Code::InvalidQuery, "role", "is required"))?
        .parse()
        .map_err(|_| ApiError::not_found())?;
    let role = state.services.roles.role(role_id).await?;
    let tables = state.services.data.tables().await?;
    let admin = role.id == ADMINISTRATORS_ROLE_ID;
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let mut followable = Vec::new();
    let views: Vec<RoleView<'_>> = tables
        .iter()
        .filter_map(|table| RoleView::of(table, role_id, admin))
        .collect();
    let readable: Vec<&data::Table> = views
        .iter()
        .filter(|view| view.methods.iter().any(|(method, _)| *method == "GET"))
        .map(|view| view.table)
        .collect();
    for view in &views {
        if readable.iter().any(|t| std::ptr::eq(*t, view.table)) {
            followable.push(format!("{}.{}", view.table.schema, view.table.name));
        }
        describe(view, &readable, &mut paths, &mut schemas);
    }
    if !views.is_empty() {
        describe_batch(&mut paths);
    }
    describe_realtime(&followable, &mut paths);
    let role_grants = state
        .services
        .grants
        .grants(permissions::GrantQuery {
            role_id: Some(role_id),
            resource_id: None,
        })
        .await?;
    let granted: Vec<Uuid> = role_grants.iter().filter_map(|g| g.workflow_id).collect();
    let invocable: Vec<Uuid> = role_grants
        .iter()
        .filter(|g| g.action == permissions::Action::Invoke)
        .filter_map(|g| g.resource_id)
        .collect();
    let entries = state.services.schema.entries().await?;
    super::openapi_rpc::describe_functions(&entries, &invocable, admin, &mut paths, &mut schemas);
    let served = state.services.views.published().await?;
    describe_views(&served, role_id, admin, &mut paths, &mut schemas);
    let hooks = state.services.workflows.webhooks(admin, &granted).await?;
    describe_webhooks(&hooks, &mut paths, &mut schemas);
    name_operations(&mut paths);
    document_common_errors(&mut paths);
    let mut document = json!({
        "openapi": "3.1.0",
        "info": { "title": format!("Tessera Data API for role {}", role.name), "version": env!("CARGO_PKG_VERSION") },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
        },
        "security": [ { "bearer": [] } ],
    });
    if !state.base_path.is_empty() {
        document["servers"] = json!([{ "url": state.base_path }]);
    }
    Ok(HttpResponse::Ok().json(document))
}

/// An optional query parameter.
fn parameter(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "schema": schema, "description": description })
}

/// `limit`, `offset` and `count` of a list. An empty value (`?limit=` from
/// a form) counts as not given, so the schemas allow it.
fn paging(limit: &str) -> [Value; 3] {
    let or_empty =
        |schema: Value| json!({ "anyOf": [schema, { "type": "string", "maxLength": 0 }] });
    [
        parameter(
            "limit",
            limit,
            or_empty(json!({ "type": "integer", "minimum": 1, "maximum": LIMIT_MAX })),
        ),
        parameter(
            "offset",
            "Rows to skip",
            or_empty(json!({ "type": "integer", "minimum": 0 })),
        ),
        parameter(
            "count",
            "exact adds meta.total",
            json!({ "type": "string", "enum": ["exact", ""] }),
        ),
    ]
}

/// Declares the refusals any operation can answer where it does not
/// already: 400 where a query, path or body is read, 413 and 415 where a
/// body is, 503 (the database unreachable) everywhere. Each is an envelope.
fn document_common_errors(paths: &mut Map<String, Value>) {
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    let operations = paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut());
    for operation in operations {
        let reads_input = operation["parameters"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            || operation.get("requestBody").is_some();
        let mut common = vec![("503", "The database is unavailable; retry later")];
        if reads_input {
            common.push(("400", "The request cannot be read"));
        }
        if operation.get("requestBody").is_some() {
            common.extend([
                ("413", "The body is too large"),
                ("415", "The body is not JSON"),
            ]);
        }
        let Some(responses) = operation["responses"].as_object_mut() else {
            continue;
        };
        for (status, description) in common {
            responses
                .entry(status)
                .or_insert_with(|| answer(description, error.clone()));
        }
    }
}

fn column_schema(column: &Column) -> Value {
    let (kind, format) = match column.kind {
        Kind::Integer => ("integer", None),
        Kind::Number => ("number", None),
        Kind::Boolean => ("boolean", None),
        Kind::Uuid => ("string", Some("uuid")),
        Kind::Date => ("string", Some("date")),
        Kind::Timestamp | Kind::TimestampTz => ("string", Some("date-time")),
        Kind::Array => ("array", None),
        Kind::Json | Kind::Jsonb => return json!({ "description": column.sql_type }),
        Kind::Text | Kind::Other => ("string", None),
    };
    let mut schema = json!({
        "type": if column.nullable { json!([kind, "null"]) } else { json!(kind) },
        "description": column.sql_type,
    });
    if let Some(format) = format {
        schema["format"] = json!(format);
    }
    schema
}

fn object(columns: &[&Column], required: bool) -> Value {
    let properties: Map<String, Value> = columns
        .iter()
        .map(|c| (c.name.clone(), column_schema(c)))
        .collect();
    let required: Vec<&str> = if required {
        columns
            .iter()
            .filter(|c| !c.nullable && !c.has_default)
            .map(|c| c.name.as_str())
            .collect()
    } else {
        Vec::new()
    };
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// The error envelope of the Data API.
pub(super) fn errors_schema() -> Value {
    json!({ "type": "object", "properties": { "errors": { "type": "array", "items": { "type": "object",
        "properties": { "code": { "type": "string" }, "message": { "type": "string" }, "field": { "type": "string" } } } } } })
}

pub(super) fn envelope(schema: Value) -> Value {
    json!({ "type": "object", "properties": { "data": schema }, "required": ["data"] })
}

pub(super) fn answer(description: &str, schema: Value) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema } } })
}

/// `POST /api/batch`, for a role that may use some table.
fn describe_batch(paths: &mut Map<String, Value>) {
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    let operation = json!({ "type": "object", "required": ["method", "path"], "properties": {
        "method": { "enum": ["GET", "POST", "PATCH", "DELETE"] },
        "path": { "type": "string", "description": "A Data API row route, /api/data/{schema}/{table}[/{pk}]; a segment may be {{n.data.<path>}}" },
        "query": { "type": "object", "additionalProperties": { "type": "string" } },
        "body": { "type": "object", "description": "The route's body, { data }; a string value {{n.data.<path>}} takes that value of operation n's answer" } } });
    paths.insert("/api/batch".into(), json!({ "post": {
        "operationId": "batch",
        "summary": "Data API operations in order, in one transaction",
        "requestBody": { "required": true, "content": { "application/json": { "schema":
            envelope(json!({ "type": "array", "items": operation, "minItems": 1, "maxItems": data::OPERATIONS_MAX })) } } },
        "responses": {
            "200": answer("Every operation's answer", envelope(json!({ "type": "array", "items": { "type": "object",
                "properties": { "status": { "type": "integer" }, "data": {} } } }))),
            "400": answer("A bad operation (meta.index once operations run); nothing written", error.clone()),
            "401": answer("No valid credential", error.clone()),
            "409": answer("An operation conflicts with a row (meta.index); nothing written", error.clone()),
            "403": answer("An operation refused (meta.index); nothing written", error.clone()),
            "404": answer("An operation's table or row is unknown (meta.index); nothing written", error),
        },
    } }));
}

fn describe(
    view: &RoleView<'_>,
    readable: &[&data::Table],
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
) {
    let table = view.table;
    let name = format!("{}.{}", table.schema, table.name);
    let collection = format!("/api/data/{}/{}", table.schema, table.name);
    let item = format!("{collection}/{{pk}}");
    let row_ref = json!({ "$ref": format!("#/components/schemas/{name}") });
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    schemas.insert("Errors".into(), errors_schema());
    let pk = json!({ "name": "pk", "in": "path", "required": true, "schema": { "type": "string" },
        "description": "The primary key (composite keys: values joined with commas)" });
    let mut on_collection = Map::new();
    let mut on_item = Map::new();
    let keyed = !table.key.is_empty();
    for (method, columns) in &view.methods {
        match *method {
            "GET" => {
                schemas.insert(name.clone(), object(columns, false));
                let list = json!({ "type": "object", "properties": {
                    "data": { "type": "array", "items": row_ref },
                    "meta": { "type": "object", "properties": { "limit": { "type": "integer" }, "offset": { "type": "integer" }, "total": { "type": "integer" } } } } });
                let text = json!({ "type": "string" });
                let embeds = data::embeds_from(table, columns, readable);
                let select = if embeds.is_empty() {
                    "Columns, comma separated".to_owned()
                } else {
                    format!(
                        "Columns, comma separated, and related rows (nested up to 3 deep; * or columns in the parentheses): {}",
                        embeds.join(", ")
                    )
                };
                let mut rows_answer = answer("The rows", list);
                rows_answer["content"]["text/csv"] = json!({ "schema": { "type": "string",
                    "description": "With Accept: text/csv: the rows as CSV (RFC 4180, header row, NULL as an empty unquoted field), every matching row unless limit is given" } });
                on_collection.insert("get".into(), json!({
                    "summary": format!("List rows of {name}"),
                    "parameters": ([
                        parameter("select", &select, text.clone()),
                        parameter("filter", "JSON filter (operators eq, neq, gt, gte, lt, lte, in, nin, like, ilike, isNull, search)", json!({ "type": "string", "contentMediaType": "application/json" })),
                        parameter("sort", "Columns, comma separated; - for descending", text.clone()),
                        parameter("aggregate", "Aggregates instead of rows: alias:fn(column), comma separated, fn count (count() counts rows), sum, avg, min or max", text.clone()),
                        parameter("groupBy", "With aggregate: columns to group by, comma separated", text.clone()),
                    ].into_iter().chain(paging(&format!("1 to {LIMIT_MAX}, default {LIMIT_DEFAULT}"))).collect::<Vec<Value>>()),
                    "responses": { "200": rows_answer, "400": answer("Bad query", error.clone()) },
                }));
                if keyed {
                    on_item.insert("get".into(), json!({
                        "summary": format!("One row of {name}"),
                        "parameters": [pk, parameter("select", &select, text)],
                        "responses": { "200": answer("The row", envelope(row_ref.clone())), "404": answer("No such row", error.clone()) },
                    }));
                }
            }
            "POST" => {
                let input = object(columns, true);
                let updates = view.methods.iter().any(|(method, _)| *method == "PATCH");
                let mut parameters = Vec::new();
                if updates && !table.unique_keys.is_empty() {
                    let keys: Vec<String> = table
                        .unique_keys
                        .iter()
                        .map(|key| {
                            key.iter()
                                .map(|&i| table.columns[i].name.as_str())
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .collect();
                    parameters.push(parameter(
                        "onConflict",
                        &format!("Upsert on a unique key: {}", keys.join(" or ")),
                        json!({ "type": "string" }),
                    ));
                }
                on_collection.insert("post".into(), json!({
                    "summary": format!("Insert rows into {name}"),
                    "parameters": parameters,
                    "requestBody": { "required": true, "content": {
                        "application/json": { "schema":
                            envelope(json!({ "oneOf": [input, { "type": "array", "items": input, "minItems": 1 }] })) },
                        "text/csv": { "schema": { "type": "string", "description": "CSV with a header row naming columns; all rows or none" } } } },
                    "responses": { "201": answer("The rows written (CSV: { inserted })", envelope(json!({}))),
                        "400": answer("Bad row (CSV: meta.line)", error.clone()),
                        "413": answer("A CSV body over data.import_max_bytes", error.clone()) },
                }));
            }
            "PATCH" if keyed => {
                on_item.insert("patch".into(), json!({
                    "summary": format!("Change a row of {name}"),
                    "parameters": [pk],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": envelope(object(columns, false)) } } },
                    "responses": { "200": answer("The row", envelope(json!({}))), "404": answer("No such row", error.clone()) },
                }));
            }
            "DELETE" if keyed => {
                on_item.insert("delete".into(), json!({
                    "summary": format!("Delete a row of {name}"),
                    "parameters": [pk],
                    "responses": { "204": { "description": "Deleted" }, "404": answer("No such row", error.clone()) },
                }));
            }
            _ => {}
        }
    }
    // Every operation may also meet a bad credential or a refused row.
    for operation in on_collection.values_mut().chain(on_item.values_mut()) {
        operation["responses"]["401"] = answer("No valid credential", error.clone());
        operation["responses"]["403"] = answer("No grant covers this", error.clone());
    }
    let subject = format!("{}{}", pascal(&table.schema), pascal(&table.name));
    for (method, operation) in on_collection.iter_mut() {
        let verb = if method == "get" { "list" } else { "create" };
        operation["operationId"] = json!(format!("{verb}{subject}"));
    }
    for (method, operation) in on_item.iter_mut() {
        let verb = match method.as_str() {
            "get" => "get",
            "patch" => "update",
            _ => "delete",
        };
        operation["operationId"] = json!(format!("{verb}{subject}Row"));
    }
    if !on_collection.is_empty() {
        paths.insert(collection, Value::Object(on_collection));
    }
    if !on_item.is_empty() {
        paths.insert(item, Value::Object(on_item));
    }
}

/// `GET /api/views/{slug}` of each view the role reads: a grant on the view
/// and a read grant on its source.
fn describe_views(
    served: &[std::sync::Arc<views::store::PublishedView>],
    role: Uuid,
    admin: bool,
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
) {
    let reads = |scopes: &[permissions::Scope]| {
        admin
            || scopes
                .iter()
                .any(|s| s.role_id == role && s.action == permissions::Action::Read)
    };
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    for served in served
        .iter()
        .filter(|view| reads(&view.scopes) && reads(&view.source.scopes))
    {
        let slug = &served.slug;
        let name = format!("View.{slug}");
        let columns: Vec<&Column> = served.shape.columns.iter().collect();
        schemas.insert(name.clone(), object(&columns, false));
        schemas.entry("Errors").or_insert_with(errors_schema);
        let list = json!({ "type": "object", "properties": {
            "data": { "type": "array", "items": { "$ref": format!("#/components/schemas/{name}") } },
            "meta": { "type": "object", "properties": { "limit": { "type": "integer" }, "offset": { "type": "integer" }, "total": { "type": "integer" } } } } });
        paths.insert(
            format!("/api/views/{slug}"),
            json!({ "get": {
                "summary": format!("Read the DataView {}", served.name),
                "operationId": format!("readView{}", pascal(slug)),
                "parameters": ([
                    parameter("filter", "JSON filter over the output columns", json!({ "type": "string", "contentMediaType": "application/json" })),
                    parameter("sort", "Output columns, comma separated; - for descending", json!({ "type": "string" })),
                ].into_iter().chain(paging(&format!("1 to {LIMIT_MAX}"))).collect::<Vec<Value>>()),
                "responses": {
                    "200": answer("The view's rows", list),
                    "400": answer("Bad query", error.clone()),
                    "401": answer("No valid credential", error.clone()),
                    "403": answer("No grant on the view or its source", error.clone()),
                    "404": answer("Not published", error.clone()),
                },
            } }),
        );
    }
}

/// `GET /api/realtime`, when the role may read some table.
fn describe_realtime(tables: &[String], paths: &mut Map<String, Value>) {
    if tables.is_empty() {
        return;
    }
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    let text = json!({ "type": "string" });
    paths.insert("/api/realtime".into(), json!({ "get": {
        "operationId": "subscribeRealtime",
        "summary": "Follow row changes as Server-Sent Events",
        "description": "A text/event-stream of `event: insert|update|delete` with `id: <event id>` and \
            `data: {\"resource\",\"row\",\"old\"?}`, each row as the list route returns it to the caller; \
            `: ping` every 15 s; `event: reset` when `Last-Event-ID` cannot be replayed; \
            `event: overflow` before a client too slow to keep up is dropped.",
        "parameters": [
            { "name": "subscribe", "in": "query", "required": true, "schema": text.clone(),
              "description": format!("Tables, comma separated, among: {}", tables.join(", ")) },
            parameter("filter", "JSON filter, applied to every listed table", json!({ "type": "string", "contentMediaType": "application/json" })),
            parameter("access_token", "The credential, for clients that cannot send headers (EventSource)", text.clone()),
            parameter("lastEventId", "Resume after this event id", text.clone()),
            { "name": "Last-Event-ID", "in": "header", "required": false, "schema": text, "description": "Resume after this event id" },
        ],
        "responses": {
            "200": { "description": "The stream", "content": { "text/event-stream": { "schema": { "type": "string" } } } },
            "400": answer("Bad subscribe or filter", error.clone()),
            "401": answer("No valid credential", error.clone()),
            "403": answer("No read grant on a listed table", error.clone()),
            "404": answer("Unknown or hidden table", error.clone()),
            "405": answer("Table not exposed for GET", error),
        },
    } }));
}

fn describe_webhooks(
    hooks: &[workflows::WebhookInfo],
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
) {
    if hooks.is_empty() {
        return;
    }
    let error = json!({ "$ref": "#/components/schemas/Errors" });
    schemas.entry("Errors").or_insert_with(|| {
        json!({ "type": "object", "properties": { "errors": { "type": "array", "items": { "type": "object",
            "properties": { "code": { "type": "string" }, "message": { "type": "string" }, "field": { "type": "string" } } } },
            "meta": { "type": "object" } } })
    });
    schemas.insert(
        "RunOutcome".into(),
        json!({ "type": "object", "properties": {
            "id": { "type": "string", "format": "uuid" },
            "status": { "type": "string", "enum": ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"] },
            "result": {},
            "error": { "type": ["object", "null"], "properties": { "code": { "type": "string" }, "message": { "type": "string" } } } },
            "required": ["id", "status", "result", "error"] }),
    );
    let outcome = envelope(json!({ "$ref": "#/components/schemas/RunOutcome" }));
    let mut authenticated = false;
    for hook in hooks {
        let mut responses = Map::new();
        if hook.sync {
            responses.insert("200".into(), answer("The run outcome", outcome.clone()));
            responses.insert(
                "504".into(),
                answer(
                    "The run did not finish within the wait; meta.run names it",
                    error.clone(),
                ),
            );
        } else {
            let started = envelope(
                json!({ "type": "object", "properties": { "run": { "type": "string", "format": "uuid" } }, "required": ["run"] }),
            );
            responses.insert("202".into(), answer("The run started", started));
        }
        responses.insert(
            "404".into(),
            answer(
                "Not published, not enabled, or the other method",
                error.clone(),
            ),
        );
        let mut operation = json!({ "summary": format!("Run workflow {}", hook.name),
            "operationId": format!("run{}Webhook", pascal(&hook.slug)), "responses": responses });
        if hook.public {
            operation["security"] = json!([]);
            operation["responses"]["429"] =
                answer("Too many calls from this address", error.clone());
        } else {
            authenticated = true;
            operation["responses"]["401"] = answer("No valid credential", error.clone());
            operation["responses"]["403"] = answer("No invoke grant", error.clone());
        }
        let method = if hook.post {
            operation["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema":
                { "type": ["object", "array"] } } } });
            operation["responses"]["400"] =
                answer("The body is not a JSON object or array", error.clone());
            "post"
        } else {
            "get"
        };
        paths.insert(
            format!("/api/workflows/{}/webhook", hook.slug),
            json!({ method: operation }),
        );
    }
    if authenticated {
        paths.insert(
            "/api/workflows/runs/{id}/result".into(),
            json!({ "get": {
                "operationId": "getRunResult",
                "summary": "The outcome of a run this caller started (while running and 24 hours after)",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }],
                "responses": { "200": answer("The run outcome", outcome), "401": answer("No valid credential", error.clone()),
                    "404": answer("No such run for this caller", error) } } }),
        );
    }
}

/// `order_lines` → `OrderLines`: the part of an operation id naming a table
/// or a workflow.
pub(super) fn pascal(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// Operation ids must be unique in a document: two names that read alike
/// (`app.order_lines` and `app_order.lines`) get a number after the first,
/// in path order, so the ids stay the same while the tables do.
fn name_operations(paths: &mut Map<String, Value>) {
    let mut seen = std::collections::HashSet::new();
    for operation in paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
    {
        let Some(id) = operation["operationId"].as_str().map(str::to_owned) else {
            continue;
        };
        let mut unique = id.clone();
        let mut n = 2;
        while !seen.insert(unique.clone()) {
            unique = format!("{id}{n}");
            n += 1;
        }
        operation["operationId"] = json!(unique);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_telling_and_unique() {
        assert_eq!(pascal("order_lines"), "OrderLines");
        assert_eq!(pascal("v2-hook"), "V2Hook");
        let mut paths = json!({
            "/api/data/app/order_lines": { "get": { "operationId": "listAppOrderLines" } },
            "/api/data/app_order/lines": { "get": { "operationId": "listAppOrderLines" } },
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        name_operations(&mut paths);
        assert_eq!(
            paths["/api/data/app/order_lines"]["get"]["operationId"],
            "listAppOrderLines"
        );
        assert_eq!(
            paths["/api/data/app_order/lines"]["get"]["operationId"],
            "listAppOrderLines2"
        );
    }
}
