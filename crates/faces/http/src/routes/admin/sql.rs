//! The SQL console.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, post, web};
use api_types::{ErrorEnvelope, SqlColumn, SqlMeta, SqlQuery, SqlResult};
use sql_console::SqlRequest;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::json_data_meta;

/// Runs one SQL statement (administrators with a session; an ADMIN token
/// only while `sql_console.allow_api_tokens` is on). Audited with its text.
#[utoipa::path(tag = "sql", operation_id = "runSql", security(("bearer" = [])),
    request_body = inline(api_types::DataEnvelope<SqlQuery>),
    responses((status = 200, description = "The statement's columns and rows; `meta.truncated` when rows were left out",
            body = inline(api_types::DataEnvelope<SqlResult>)),
        (status = 400, description = "More than one statement, a bad parameter, or PostgreSQL's refusal (SQL_ERROR, with the error's `position`)", body = ErrorEnvelope),
        (status = 403, description = "A token while sql_console.allow_api_tokens is off", body = ErrorEnvelope)))]
#[post("/sql")]
pub async fn run(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<SqlQuery>,
) -> Result<HttpResponse, ApiError> {
    let SqlQuery {
        query,
        params,
        read_only,
    } = body.0;
    let answer = state
        .services
        .sql
        .run(
            &caller.principal,
            SqlRequest {
                query,
                params,
                read_only,
            },
            caller.ip(),
        )
        .await?;
    let columns: Vec<SqlColumn> = answer
        .output
        .columns
        .into_iter()
        .map(|c| SqlColumn {
            name: c.name,
            type_name: c.type_name,
        })
        .collect();
    // Serializing names and numbers cannot fail.
    let columns = serde_json::to_string(&columns).unwrap_or_default();
    let meta = serde_json::to_string(&SqlMeta {
        truncated: answer.output.truncated,
    })
    .unwrap_or_default();
    let data = format!(
        "{{\"columns\":{columns},\"rows\":{},\"rowCount\":{},\"durationMs\":{}}}",
        answer.output.rows,
        answer.output.row_count,
        (answer.duration_ms * 1000.0).round() / 1000.0
    );
    Ok(json_data_meta(StatusCode::OK, &data, &meta))
}
