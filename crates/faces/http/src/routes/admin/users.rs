//! User administration.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{
    CreateUserRequest, ErrorEnvelope, LinkedIdentity, PageMeta, PagedEnvelope, UpdateUserRequest,
    User, UserListQuery,
};
use auth::{ChangeUser, CreateUser};
use uuid::Uuid;

use super::{page_limit, page_offset};
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};
use crate::{AppState, convert};

/// A page of users, optionally searched by email or name.
#[utoipa::path(operation_id = "listUsers", tag = "users", security(("bearer" = [])), params(UserListQuery),
    responses((status = 200, body = inline(PagedEnvelope<User>)), (status = 400, body = ErrorEnvelope)))]
#[get("/users")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    query: web::Query<UserListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = page_limit(query.limit)?;
    let page = state
        .services
        .accounts
        .users(query.search.as_deref(), limit, page_offset(query.offset)?)
        .await?;
    Ok(HttpResponse::Ok().json(PagedEnvelope {
        data: page.users.into_iter().map(convert::user).collect(),
        meta: PageMeta { total: page.total },
    }))
}

/// Creates a user. Without `roleIds` the user gets the `Users` role.
#[utoipa::path(operation_id = "createUser", tag = "users", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<CreateUserRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<User>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/users")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<CreateUserRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let input = CreateUser {
        email: b.email,
        name: b.name,
        password: b.password,
        role_ids: b.role_ids,
        email_verified: b.email_verified,
        timezone: b.timezone,
    };
    let user = state
        .services
        .accounts
        .create_user(caller.principal.actor(), input, caller.ip())
        .await?;
    Ok(created(convert::user(user)))
}

/// One user.
#[utoipa::path(operation_id = "getUser", tag = "users", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<User>)), (status = 404, body = ErrorEnvelope)))]
#[get("/users/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(convert::user(
        state.services.accounts.user(id.into_inner()).await?,
    )))
}

/// Changes a user. A new password or deactivation ends the user's sessions.
#[utoipa::path(operation_id = "updateUser", tag = "users", security(("bearer" = [])), params(("id" = Uuid, Path)), request_body = inline(api_types::DataEnvelope<UpdateUserRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<User>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[patch("/users/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<UpdateUserRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let input = ChangeUser {
        name: b.name,
        email: b.email,
        password: b.password,
        role_ids: b.role_ids,
        active: b.active,
        email_verified: b.email_verified,
        timezone: b.timezone,
    };
    let user = state
        .services
        .accounts
        .update_user(Some(&caller.principal), id.into_inner(), input, caller.ip())
        .await?;
    Ok(ok(convert::user(user)))
}

/// Deletes a user with their sessions and tokens.
#[utoipa::path(operation_id = "deleteUser", tag = "users", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[delete("/users/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .delete_user(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}

/// The identities of providers linked to a user.
#[utoipa::path(operation_id = "listUserIdentities", tag = "users", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<LinkedIdentity>>)), (status = 404, body = ErrorEnvelope)))]
#[get("/users/{id}/identities")]
pub async fn identities(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let identities = state.services.oauth.identities(id.into_inner()).await?;
    Ok(ok(identities
        .into_iter()
        .map(convert::identity)
        .collect::<Vec<_>>()))
}

/// Unlinks an identity from a user: it no longer signs in to this account.
#[utoipa::path(operation_id = "deleteUserIdentity", tag = "users", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("identityId" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/users/{id}/identities/{identityId}")]
pub async fn unlink_identity(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (user_id, identity_id) = path.into_inner();
    state
        .services
        .oauth
        .unlink(&caller.principal, user_id, identity_id, caller.ip())
        .await?;
    Ok(no_content())
}

/// Removes a user's second factors: TOTP, recovery codes and passkeys.
#[utoipa::path(operation_id = "resetUserMfa", tag = "users", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/users/{id}/mfa")]
pub async fn reset_mfa(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .sign_in
        .reset_mfa(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}
