//! Grants.

use actix_web::{HttpResponse, delete, get, post, web};
use api_types::{CreateGrantRequest, ErrorEnvelope, Grant, GrantListQuery};
use permissions::{GrantQuery, NewGrant};
use uuid::Uuid;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};

fn grant(g: permissions::Grant) -> Grant {
    Grant {
        id: g.id,
        role_id: g.role_id,
        resource_id: g.resource_id,
        workflow_id: g.workflow_id,
        data_view_id: g.data_view_id,
        action: g.action.as_str().to_owned(),
        filter: g.filter,
        columns: g.columns,
    }
}

/// Grants, optionally of one role or on one resource.
#[utoipa::path(operation_id = "listGrants", tag = "grants", security(("bearer" = [])), params(GrantListQuery),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Grant>>))))]
#[get("/grants")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    query: web::Query<GrantListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = GrantQuery {
        role_id: query.role_id,
        resource_id: query.resource_id,
    };
    let grants = state.services.grants.grants(query).await?;
    Ok(ok(grants.into_iter().map(grant).collect::<Vec<_>>()))
}

/// Gives a role an action on a resource (read, create, update, delete), a
/// workflow (invoke) or a DataView (read), with an optional row filter and,
/// on a resource, a column list.
#[utoipa::path(operation_id = "createGrant", tag = "grants", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<CreateGrantRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<Grant>)), (status = 400, body = ErrorEnvelope)))]
#[post("/grants")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<CreateGrantRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let input = NewGrant {
        role_id: b.role_id,
        resource_id: b.resource_id,
        workflow_id: b.workflow_id,
        data_view_id: b.data_view_id,
        action: b.action,
        filter: b.filter,
        columns: b.columns,
    };
    let created_grant = state
        .services
        .grants
        .create(&caller.principal, input, caller.ip())
        .await?;
    Ok(created(grant(created_grant)))
}

/// Removes a grant.
#[utoipa::path(operation_id = "deleteGrant", tag = "grants", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/grants/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .grants
        .delete(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}
