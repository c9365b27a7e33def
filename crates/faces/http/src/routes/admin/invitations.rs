//! Invitations.

use actix_web::{HttpResponse, delete, get, post, web};
use api_types::{CreateInvitationRequest, ErrorEnvelope, Invitation};
use auth::InviteRequest;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};
use crate::{AppState, convert};

/// Pending invitations, newest first.
#[utoipa::path(operation_id = "listInvitations", tag = "invitations", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Invitation>>))))]
#[get("/invitations")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let invitations = state.services.accounts.invitations().await?;
    Ok(ok(invitations
        .into_iter()
        .map(convert::invitation)
        .collect::<Vec<_>>()))
}

/// Invites someone; the email with the acceptance link is queued. 409 when the email has an account.
#[utoipa::path(operation_id = "createInvitation", tag = "invitations", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<CreateInvitationRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<Invitation>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/invitations")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<CreateInvitationRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let request = InviteRequest {
        email: b.email,
        name: b.name,
        role_ids: b.role_ids,
    };
    let invitation = state
        .services
        .accounts
        .invite(&caller.principal, request, caller.ip())
        .await?;
    Ok(created(convert::invitation(invitation)))
}

/// Withdraws a pending invitation; its link stops working.
#[utoipa::path(operation_id = "deleteInvitation", tag = "invitations", security(("bearer" = [])), params(("id" = Uuid, Path)), responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/invitations/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .revoke_invitation(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}
