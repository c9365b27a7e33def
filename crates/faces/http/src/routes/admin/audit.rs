//! The audit log.

use actix_web::{HttpResponse, get, web};
use api_types::{AuditEntry, AuditListQuery, ErrorEnvelope};

use super::page_limit;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller};
use crate::respond::ok;
use crate::{AppState, convert};

/// Audit entries, newest first; `before` (an entry id or an RFC 3339 instant) pages back.
#[utoipa::path(operation_id = "listAuditEvents", tag = "audit", security(("bearer" = [])), params(AuditListQuery),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<AuditEntry>>)), (status = 400, body = ErrorEnvelope)))]
#[get("/audit")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    query: web::Query<AuditListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = page_limit(query.limit)?;
    let entries = state
        .services
        .audit
        .entries(query.action, query.actor_id, limit, query.before.as_deref())
        .await?;
    Ok(ok(entries
        .into_iter()
        .map(convert::audit_entry)
        .collect::<Vec<_>>()))
}
