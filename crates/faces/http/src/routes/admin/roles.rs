//! Roles and role members.

use actix_web::{HttpResponse, delete, get, patch, post, put, web};
use api_types::{CreateRoleRequest, ErrorEnvelope, Role, UpdateRoleRequest, User};
use data::RoleSubject;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data, LazyCaller};
use crate::respond::{created, json_page, no_content, ok};
use crate::routes::data::{ListQuery, list_params};
use crate::{AppState, convert};

/// All roles, built-ins first.
#[utoipa::path(operation_id = "listRoles", tag = "roles", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Role>>))))]
#[get("/roles")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let roles = state.services.roles.roles().await?;
    Ok(ok(roles.into_iter().map(convert::role).collect::<Vec<_>>()))
}

/// Creates a role.
#[utoipa::path(operation_id = "createRole", tag = "roles", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<CreateRoleRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<Role>)), (status = 400, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[post("/roles")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<CreateRoleRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let role = state
        .services
        .roles
        .create(
            &caller.principal,
            &b.name,
            b.description.as_deref(),
            b.api_access,
            caller.ip(),
        )
        .await?;
    Ok(created(convert::role(role)))
}

/// One role.
#[utoipa::path(operation_id = "getRole", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<Role>)), (status = 404, body = ErrorEnvelope)))]
#[get("/roles/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(convert::role(
        state.services.roles.role(id.into_inner()).await?,
    )))
}

/// Changes a role; built-in roles keep their name and API access.
#[utoipa::path(operation_id = "updateRole", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path)), request_body = inline(api_types::DataEnvelope<UpdateRoleRequest>),
    responses((status = 200, body = inline(api_types::DataEnvelope<Role>)), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
        (status = 409, description = "the name is taken", body = ErrorEnvelope)))]
#[patch("/roles/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<UpdateRoleRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let description = b.description.as_ref().map(Option::as_deref);
    let role = state
        .services
        .roles
        .update(
            &caller.principal,
            id.into_inner(),
            b.name.as_deref(),
            description,
            b.api_access,
            caller.ip(),
        )
        .await?;
    Ok(ok(convert::role(role)))
}

/// Deletes a role; built-in roles give 400.
#[utoipa::path(operation_id = "deleteRole", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[delete("/roles/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .roles
        .delete(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}

/// The members of a role.
#[utoipa::path(operation_id = "listRoleMembers", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<User>>)), (status = 404, body = ErrorEnvelope)))]
#[get("/roles/{id}/members")]
pub async fn members(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let users = state
        .services
        .accounts
        .role_members(id.into_inner())
        .await?;
    Ok(ok(users.into_iter().map(convert::user).collect::<Vec<_>>()))
}

/// Adds a user to a role (idempotent).
#[utoipa::path(operation_id = "addRoleMember", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path), ("userId" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[put("/roles/{id}/members/{userId}")]
pub async fn add_member(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (role_id, user_id) = path.into_inner();
    state
        .services
        .roles
        .add_member(&caller.principal, role_id, user_id, caller.ip())
        .await?;
    Ok(no_content())
}

/// Removes a user from a role (idempotent); the last administrator cannot be removed.
#[utoipa::path(operation_id = "removeRoleMember", tag = "roles", security(("bearer" = [])), params(("id" = Uuid, Path), ("userId" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope), (status = 409, body = ErrorEnvelope)))]
#[delete("/roles/{id}/members/{userId}")]
pub async fn remove_member(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (role_id, user_id) = path.into_inner();
    state
        .services
        .roles
        .remove_member(&caller.principal, role_id, user_id, caller.ip())
        .await?;
    Ok(no_content())
}

/// Who stands for `$USER` in a preview.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct PreviewQuery {
    /// The user `$USER` stands for (default: nobody, so row filters on
    /// `$USER` match no row).
    user_id: Option<Uuid>,
}

/// What a member of this role alone reads from the list route of a table:
/// the same parameters, the same answer and the same refusals, under the
/// role's grants, row filters and column lists (preview as this role).
#[utoipa::path(operation_id = "previewRoleRows", tag = "roles", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("schema" = String, Path), ("table" = String, Path), ListQuery, PreviewQuery),
    responses((status = 200, description = "{ data: [row], meta }, as the list route answers the role"), (status = 400, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope)))]
#[get("/roles/{id}/preview/{schema}/{table}")]
pub async fn preview(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    caller: LazyCaller,
    path: web::Path<(Uuid, String, String)>,
    query: web::Query<ListQuery>,
    user: web::Query<PreviewQuery>,
) -> Result<HttpResponse, ApiError> {
    let (id, schema, table) = path.into_inner();
    let role = state.services.roles.role(id).await?;
    let subject = RoleSubject {
        id: role.id,
        api_access: role.api_access,
    };
    let page = state
        .services
        .data
        .list_as_role(
            caller.request(),
            subject,
            user.user_id,
            (&schema, &table),
            &list_params(query.into_inner()),
        )
        .await?;
    Ok(json_page(page))
}
