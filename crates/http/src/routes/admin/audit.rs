//! The audit log.

use actix_web::{HttpResponse, get, web};
use api_types::{AuditEntry, AuditListQuery, ErrorEnvelope};
use audit::{AuditQuery, Before};
use kernel::Code;

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
    let before = match query.before.as_deref() {
        None => None,
        Some(raw) => Some(match raw.parse() {
            Ok(id) => Before::Id(id),
            Err(_) => Before::Time(
                chrono::DateTime::parse_from_rfc3339(raw)
                    .map_err(|_| {
                        ApiError::field(
                            Code::InvalidQuery,
                            "before",
                            "must be an entry id or an RFC 3339 instant",
                        )
                    })?
                    .to_utc(),
            ),
        }),
    };
    if query.action.as_ref().is_some_and(|a| a.len() > 100) {
        return Err(ApiError::field(
            Code::InvalidQuery,
            "action",
            "must be at most 100 characters",
        ));
    }
    let filter = AuditQuery {
        action: query.action.filter(|a| !a.is_empty()),
        actor_id: query.actor_id,
        limit: page_limit(query.limit)?,
        before,
    };
    let entries = state.audit.audit(&filter).await?;
    Ok(ok(entries
        .into_iter()
        .map(convert::audit_entry)
        .collect::<Vec<_>>()))
}
