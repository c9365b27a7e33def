//! Tables that change after they are created: rename a table, change or
//! drop a column, list, build and drop indexes (API.md section 12).

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{
    ColumnChangeRequest, ErrorEnvelope, IndexDefinition, IndexInfo, TableInfo, TablePreview,
    TableRenameRequest,
};
use schema::{ColumnChange, ColumnPatch, IndexInput};
use serde_json::Value;

use super::schema::table_info;
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};

fn patch_of(c: ColumnChangeRequest) -> ColumnChange {
    ColumnChange::Alter(ColumnPatch {
        name: c.name,
        data_type: c.data_type,
        nullable: c.nullable,
        default: c.default,
        check: c.check,
        check_message: c.check_message,
        unique: c.unique,
    })
}

fn index_of(i: IndexDefinition) -> IndexInput {
    IndexInput {
        name: i.name,
        columns: i.columns,
        unique: i.unique,
        method: i.method,
        filter: i.filter,
    }
}

/// Renames a table; its resource id, grants, exposure, DataViews and
/// workflows' data steps follow.
#[utoipa::path(operation_id = "renameTable", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    request_body = inline(api_types::DataEnvelope<TableRenameRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<TableInfo>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[patch("/schema/{schema}/tables/{table}")]
pub async fn rename_table(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
    body: Data<TableRenameRequest>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    let renamed = state
        .services
        .schema
        .rename_table(
            &caller.principal,
            (&schema_name, &table_name),
            &body.0.name,
            caller.ip(),
        )
        .await?;
    Ok(ok(table_info(renamed)))
}

/// The SQL a column change would run, after running it and rolling back.
#[utoipa::path(operation_id = "previewColumnChange", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path), ("column" = String, Path)),
    request_body = inline(api_types::DataEnvelope<ColumnChangeRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<TablePreview>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables/{table}/columns/{column}/preview")]
pub async fn preview_column(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String, String)>,
    body: Data<ColumnChangeRequest>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name, column) = path.into_inner();
    let (sql, _) = state
        .services
        .schema
        .change_column(
            &caller.principal,
            (&schema_name, &table_name, &column),
            &patch_of(body.0),
            false,
            None,
        )
        .await?;
    Ok(ok(TablePreview { sql }))
}

/// Changes a column: name, type (values converted), nullable, default,
/// check with its message, unique.
#[utoipa::path(operation_id = "alterColumn", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path), ("column" = String, Path)),
    request_body = inline(api_types::DataEnvelope<ColumnChangeRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<Object>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[patch("/schema/{schema}/tables/{table}/columns/{column}")]
pub async fn alter_column(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String, String)>,
    body: Data<ColumnChangeRequest>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name, column) = path.into_inner();
    let (_, described) = state
        .services
        .schema
        .change_column(
            &caller.principal,
            (&schema_name, &table_name, &column),
            &patch_of(body.0),
            true,
            caller.ip(),
        )
        .await?;
    Ok(ok(described.unwrap_or(Value::Null)))
}

/// Drops a column; grants' column lists lose it.
#[utoipa::path(operation_id = "dropColumn", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path), ("column" = String, Path)),
    responses((status = 204), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[delete("/schema/{schema}/tables/{table}/columns/{column}")]
pub async fn drop_column(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name, column) = path.into_inner();
    state
        .services
        .schema
        .change_column(
            &caller.principal,
            (&schema_name, &table_name, &column),
            &ColumnChange::Drop,
            true,
            caller.ip(),
        )
        .await?;
    Ok(no_content())
}

/// Every index of a table, the primary key's included.
#[utoipa::path(operation_id = "listIndexes", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<IndexInfo>>)), (status = 404, body = ErrorEnvelope)))]
#[get("/schema/{schema}/tables/{table}/indexes")]
pub async fn indexes(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    Ok(ok(state
        .services
        .schema
        .indexes(&schema_name, &table_name)
        .await?))
}

/// The SQL an index build would run, after the same validation.
#[utoipa::path(operation_id = "previewIndex", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    request_body = inline(api_types::DataEnvelope<IndexDefinition>),
    responses((status = 200, body = inline(api_types::DataEnvelope<TablePreview>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables/{table}/indexes/preview")]
pub async fn preview_index(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
    body: Data<IndexDefinition>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    let (sql, _) = state
        .services
        .schema
        .create_index(
            &caller.principal,
            (&schema_name, &table_name),
            &index_of(body.0),
            false,
            None,
        )
        .await?;
    Ok(ok(TablePreview { sql }))
}

/// Builds an index concurrently: writes to the table go on meanwhile; a
/// failed build leaves nothing behind.
#[utoipa::path(operation_id = "createIndex", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path)),
    request_body = inline(api_types::DataEnvelope<IndexDefinition>),
    responses((status = 201, body = inline(api_types::DataEnvelope<IndexInfo>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/schema/{schema}/tables/{table}/indexes")]
pub async fn create_index(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String)>,
    body: Data<IndexDefinition>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name) = path.into_inner();
    let (_, built) = state
        .services
        .schema
        .create_index(
            &caller.principal,
            (&schema_name, &table_name),
            &index_of(body.0),
            true,
            caller.ip(),
        )
        .await?;
    Ok(created(built.unwrap_or(Value::Null)))
}

/// Drops an index concurrently.
#[utoipa::path(operation_id = "dropIndex", tag = "schema", security(("bearer" = [])), params(("schema" = String, Path), ("table" = String, Path), ("name" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[delete("/schema/{schema}/tables/{table}/indexes/{name}")]
pub async fn drop_index(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (schema_name, table_name, name) = path.into_inner();
    state
        .services
        .schema
        .drop_index(
            &caller.principal,
            (&schema_name, &table_name, &name),
            caller.ip(),
        )
        .await?;
    Ok(no_content())
}
