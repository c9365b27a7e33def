//! Tables: create (with preview), list, add a column, drop; and resources.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{
    ColumnDefinition, ErrorEnvelope, ExposeRequest, FunctionResource, RegisterResourceRequest,
    Resource, ResourceEntry, TableCreated, TableDefinition, TableInfo, TablePreview,
};
use kernel::FieldError;
use schema::{ColumnInput, ForeignKeyInput, TableInput};
use uuid::Uuid;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};

fn column(c: ColumnDefinition) -> ColumnInput {
    ColumnInput {
        name: c.name,
        data_type: c.data_type,
        primary_key: c.primary_key,
        default: c.default,
        identity: c.identity,
        nullable: c.nullable,
        foreign_key: c.foreign_key.map(|f| ForeignKeyInput {
            target_schema: f.target_schema,
            target_table: f.target_table,
            target_column: f.target_column,
            on_delete: f.on_delete,
        }),
        check: c.check,
        check_message: c.check_message,
        unique: c.unique,
    }
}

fn table(t: TableDefinition) -> TableInput {
    TableInput {
        name: t.name,
        columns: t.columns.into_iter().map(column).collect(),
    }
}

/// A table as the list shows it.
pub(super) fn table_info(t: schema::TableInfo) -> TableInfo {
    TableInfo {
        name: t.name,
        resource_id: t.resource_id,
        columns: t.columns,
        indexes: t.indexes,
        foreign_keys: t.foreign_keys,
        referenced_by: t.referenced_by,
    }
}

fn resource(r: schema::Resource) -> Resource {
    Resource {
        id: r.id,
        kind: "table",
        schema: r.schema,
        table: r.table,
        exposed_methods: r.exposed_methods,
        created_at: r.created_at,
    }
}

fn function(f: schema::Function) -> FunctionResource {
    let signature = f.signature.as_ref();
    FunctionResource {
        id: f.id,
        kind: "function",
        schema: f.schema,
        function: f.name,
        arguments: signature
            .map(|s| {
                s.arguments
                    .iter()
                    .map(|a| api_types::FunctionArgument {
                        name: a.name.clone(),
                        data_type: a.data_type.clone(),
                        has_default: a.has_default,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        returns: signature.map(|s| api_types::FunctionReturns {
            data_type: s.returns.data_type.clone(),
            set: s.returns.set,
        }),
        volatility: signature.map(|s| s.volatility.as_str().to_owned()),
        exposed_methods: f.exposed_methods,
        created_at: f.created_at,
    }
}

fn entry(e: schema::ResourceEntry) -> ResourceEntry {
    match e {
        schema::ResourceEntry::Table(r) => ResourceEntry::Table(resource(r)),
        schema::ResourceEntry::Function(f) => ResourceEntry::Function(function(f)),
    }
}

/// Creates a table, hidden, with its resource; DDL, resource and audit entry in one transaction.
#[utoipa::path(operation_id = "createTable", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path)),
    request_body = inline(api_types::DataEnvelope<TableDefinition>),
    responses((status = 201, body = inline(api_types::DataEnvelope<TableCreated>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables")]
pub async fn create_table(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<String>,
    body: Data<TableDefinition>,
) -> Result<HttpResponse, ApiError> {
    let (resource_id, plan) = state
        .services
        .schema
        .create_table(&caller.principal, &path, &table(body.0), caller.ip())
        .await?;
    Ok(created(TableCreated {
        resource_id,
        name: plan.table,
        schema: plan.schema,
    }))
}

/// The SQL create would run, after the same validation; changes nothing.
#[utoipa::path(operation_id = "previewTable", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path)),
    request_body = inline(api_types::DataEnvelope<TableDefinition>),
    responses((status = 200, body = inline(api_types::DataEnvelope<TablePreview>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables/preview")]
pub async fn preview_table(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<String>,
    body: Data<TableDefinition>,
) -> Result<HttpResponse, ApiError> {
    let sql = state
        .services
        .schema
        .preview_table(&caller.principal, &path, &table(body.0))
        .await?;
    Ok(ok(TablePreview { sql }))
}

/// The tables of a schema, introspected from the catalog.
#[utoipa::path(operation_id = "listTables", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<TableInfo>>)), (status = 400, body = ErrorEnvelope)))]
#[get("/schema/{schema}/tables")]
pub async fn tables(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tables = state.services.schema.tables(&path).await?;
    Ok(ok(tables.into_iter().map(table_info).collect::<Vec<_>>()))
}

/// Adds one column, with the same validation as create.
#[utoipa::path(operation_id = "addColumn", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    request_body = inline(api_types::DataEnvelope<ColumnDefinition>),
    responses((status = 201, body = inline(api_types::DataEnvelope<TableCreated>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables/{table}/columns")]
pub async fn add_column(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
    body: Data<ColumnDefinition>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    let resource_id = state
        .services
        .schema
        .add_column(
            &caller.principal,
            &schema_name,
            &table_name,
            &column(body.0),
            caller.ip(),
        )
        .await?;
    Ok(created(TableCreated {
        resource_id,
        name: table_name,
        schema: schema_name,
    }))
}

/// Drops a table; its resource and exposure go with it.
#[utoipa::path(operation_id = "dropTable", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[delete("/schema/{schema}/tables/{table}")]
pub async fn drop_table(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    state
        .services
        .schema
        .drop_table(&caller.principal, &schema_name, &table_name, caller.ip())
        .await?;
    Ok(no_content())
}

/// Every resource: tables, then database functions.
#[utoipa::path(operation_id = "listResources", tag = "resources", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<Vec<ResourceEntry>>))))]
#[get("/resources")]
pub async fn resources(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let list = state.services.schema.entries().await?;
    Ok(ok(list.into_iter().map(entry).collect::<Vec<_>>()))
}

/// Registers a table or a database function that exists already, hidden.
#[utoipa::path(operation_id = "registerResource", tag = "resources", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<RegisterResourceRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<ResourceEntry>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/resources")]
pub async fn register(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<RegisterResourceRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let schema = &state.services.schema;
    let registered = match (&body.table, &body.function) {
        (Some(table), None) => ResourceEntry::Table(resource(
            schema
                .register(&caller.principal, &body.schema, table, caller.ip())
                .await?,
        )),
        (None, Some(name)) => ResourceEntry::Function(function(
            schema
                .register_function(&caller.principal, &body.schema, name, caller.ip())
                .await?,
        )),
        _ => {
            return Err(FieldError::new("table", "give exactly one of table and function").into());
        }
    };
    Ok(created(registered))
}

/// One resource.
#[utoipa::path(operation_id = "getResource", tag = "resources", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<ResourceEntry>)), (status = 404, body = ErrorEnvelope)))]
#[get("/resources/{id}")]
pub async fn get_resource(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(entry(
        state.services.schema.entry(id.into_inner()).await?,
    )))
}

/// Sets the methods the Data API answers for a resource (a function: POST,
/// and GET when it is immutable or stable).
#[utoipa::path(operation_id = "updateResource", tag = "resources", security(("bearer" = [])), params(("id" = Uuid, Path)), request_body = inline(api_types::DataEnvelope<ExposeRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<ResourceEntry>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[patch("/resources/{id}")]
pub async fn expose(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<ExposeRequest>,
) -> Result<HttpResponse, ApiError> {
    let updated = state
        .services
        .schema
        .expose_entry(
            &caller.principal,
            id.into_inner(),
            &body.0.exposed_methods,
            caller.ip(),
        )
        .await?;
    Ok(ok(entry(updated)))
}
