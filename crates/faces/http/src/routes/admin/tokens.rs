//! Personal access tokens of any user.

use actix_web::{HttpResponse, delete, get, post, web};
use api_types::{AdminCreateTokenRequest, ErrorEnvelope, IssuedToken, Token, TokenListQuery};
use auth::TokenRequest;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};
use crate::{AppState, convert};

/// Live tokens, of one user (`userId`) or of everyone.
#[utoipa::path(operation_id = "listTokens", tag = "tokens", security(("bearer" = [])), params(TokenListQuery),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Token>>))))]
#[get("/tokens")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    query: web::Query<TokenListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tokens = state.services.sign_in.tokens(query.user_id).await?;
    Ok(ok(tokens
        .into_iter()
        .map(convert::token)
        .collect::<Vec<_>>()))
}

/// Creates a token for any user; the secret is in this answer only.
#[utoipa::path(operation_id = "createToken", tag = "tokens", security(("bearer" = [])), request_body = inline(api_types::DataEnvelope<AdminCreateTokenRequest>),
    responses((status = 201, body = inline(api_types::DataEnvelope<IssuedToken>)), (status = 400, body = ErrorEnvelope)))]
#[post("/tokens")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<AdminCreateTokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let request = TokenRequest {
        name: b.name,
        lifetime_days: b.lifetime_days,
        plane: b.plane,
    };
    let issued = state
        .services
        .sign_in
        .create_token(&caller.principal, b.user_id, request, caller.ip())
        .await?;
    Ok(created(convert::issued(issued)))
}

/// Revokes a token at once.
#[utoipa::path(operation_id = "revokeToken", tag = "tokens", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/tokens/{id}")]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .sign_in
        .revoke_token(&caller.principal, id.into_inner(), None, caller.ip())
        .await?;
    Ok(no_content())
}
