//! Runtime settings.

use actix_web::{HttpResponse, get, patch, web};
use api_types::{ErrorEnvelope, SettingsMap};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::ok;

/// Every setting with its value in force; write-only secrets read as null.
#[utoipa::path(operation_id = "getSettings", tag = "settings", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<SettingsMap>))))]
#[get("/settings")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(SettingsMap(state.services.settings.settings().await?)))
}

/// Changes settings; answers the full settings object. `mcp.*` and
/// `sql_console.allow_api_tokens` need a session.
#[utoipa::path(operation_id = "updateSettings", tag = "settings", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<SettingsMap>),
    responses((status = 200, body = inline(api_types::DataEnvelope<SettingsMap>)), (status = 400, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope)))]
#[patch("/settings")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<SettingsMap>,
) -> Result<HttpResponse, ApiError> {
    let settings = state
        .services
        .settings
        .update(&caller.principal, &body.0.0, caller.ip())
        .await?;
    Ok(ok(SettingsMap(settings)))
}
