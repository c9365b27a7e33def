//! Snapshots: the configuration exported, diffed against and applied from a
//! document that names things, never ids (API.md section 12).

use actix_web::{HttpResponse, get, post, web};
use api_types::{ErrorEnvelope, SnapshotApplied, SnapshotApplyRequest, SnapshotDiff, SnapshotStep};
use serde_json::Value;
use snapshot::{Consent, StepReport};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::ok;

fn step(s: StepReport) -> SnapshotStep {
    SnapshotStep {
        action: s.action.to_owned(),
        kind: s.kind.to_owned(),
        name: s.name,
        sql: s.sql,
        old: s.values.as_ref().map(|(old, _)| old.clone()),
        new: s.values.map(|(_, new)| new),
        admin_power: s.admin_power.is_some(),
        admin_power_reason: s.admin_power,
    }
}

/// The configuration as a snapshot: byte-identical for one state.
#[utoipa::path(operation_id = "exportSnapshot", tag = "snapshot", security(("bearer" = [])),
    responses((status = 200, body = inline(api_types::DataEnvelope<Object>))))]
#[get("/snapshot")]
pub async fn export(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(state.services.snapshots.export().await?))
}

/// The steps that would make this instance match a snapshot; nothing
/// changes and no table is locked; audited as `snapshot.diff`.
#[utoipa::path(operation_id = "diffSnapshot", tag = "snapshot", security(("bearer" = [])),
    request_body = inline(api_types::DataEnvelope<Object>),
    responses((status = 200, body = inline(api_types::DataEnvelope<SnapshotDiff>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/snapshot/diff")]
pub async fn diff(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<Value>,
) -> Result<HttpResponse, ApiError> {
    let planned = state
        .services
        .snapshots
        .diff(caller.principal.actor(), &body.0, caller.ip())
        .await?;
    Ok(ok(SnapshotDiff {
        steps: planned.steps.into_iter().map(step).collect(),
        destructive: planned.destructive,
    }))
}

/// Makes this instance match a snapshot, in one transaction. Steps that
/// drop or retype need `allowDestructive` (409), steps that give
/// administrator power `allowAdminPower` (400 naming the step).
#[utoipa::path(operation_id = "applySnapshot", tag = "snapshot", security(("bearer" = [])),
    request_body = inline(api_types::DataEnvelope<SnapshotApplyRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<SnapshotApplied>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/snapshot/apply")]
pub async fn apply(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<SnapshotApplyRequest>,
) -> Result<HttpResponse, ApiError> {
    let steps = state
        .services
        .snapshots
        .apply(
            caller.principal.actor(),
            &body.0.snapshot,
            Consent {
                destructive: body.0.allow_destructive,
                admin_power: body.0.allow_admin_power,
            },
            caller.ip(),
        )
        .await?;
    Ok(ok(SnapshotApplied {
        steps: steps.into_iter().map(step).collect(),
    }))
}
