//! `/api/auth`: sign-in, the signed-in user, sessions and personal tokens.
//! Bodies carry their fields at the top level.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{
    CreateTokenRequest, ErrorEnvelope, IssuedToken, LoginRequest, LoginResponse, Session, Token,
    UpdateMeRequest, User,
};
use auth::TokenRequest;
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{Body, Caller, ClientOrigin, Enrolling, LazyCaller, Policy, SessionOnly};
use crate::respond::{created, no_content, ok};
use crate::{AppState, convert};

/// Signs in with email and password. Every failure answers the same 401.
#[utoipa::path(operation_id = "login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<LoginResponse>)),
              (status = 401, description = "Invalid email or password; or MFA_REQUIRED, after the right password of an account with TOTP on, with the `challenge` to finish at POST /api/auth/mfa/verify", body = ErrorEnvelope),
              (status = 403, description = "EMAIL_NOT_VERIFIED", body = ErrorEnvelope),
              (status = 429, description = "Too many sign-in attempts from this address", body = ErrorEnvelope)))]
#[post("/login")]
pub async fn login(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<LoginRequest>,
) -> Result<HttpResponse, ApiError> {
    let (token, user) = state
        .services
        .sign_in
        .login(&body.0.email, &body.0.password, origin.0)
        .await?;
    Ok(ok(LoginResponse {
        token,
        user: convert::user(user),
    }))
}

/// Ends the current session.
#[utoipa::path(operation_id = "logout", tag = "auth", security(("bearer" = [])), responses((status = 204), (status = 401, body = ErrorEnvelope)))]
#[post("/logout")]
pub async fn logout(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .sign_in
        .logout(&caller.principal, caller.ip())
        .await?;
    Ok(no_content())
}

/// The signed-in user.
#[utoipa::path(operation_id = "getMe", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = inline(api_types::DataEnvelope<User>)), (status = 401, body = ErrorEnvelope)))]
#[get("/me")]
pub async fn me(state: web::Data<AppState>, caller: LazyCaller) -> Result<HttpResponse, ApiError> {
    let (principal, user) = state.services.sign_in.me(caller.request().bearer).await?;
    principal.authorize(SessionOnly::PLANE, SessionOnly::SESSION_ONLY)?;
    Ok(ok(convert::user(user)))
}

/// Changes the signed-in user's name or time zone.
#[utoipa::path(operation_id = "updateMe", tag = "auth", security(("bearer" = [])), request_body = UpdateMeRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<User>)), (status = 400, body = ErrorEnvelope)))]
#[patch("/me")]
pub async fn update_me(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
    body: Body<UpdateMeRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let user = state
        .services
        .accounts
        .update_me(&caller.principal, body.name, body.timezone, caller.ip())
        .await?;
    Ok(ok(convert::user(user)))
}

/// The signed-in user's live sessions.
#[utoipa::path(operation_id = "listMySessions", tag = "auth", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Session>>))))]
#[get("/sessions")]
pub async fn sessions(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
) -> Result<HttpResponse, ApiError> {
    let current = caller.principal.session_id();
    let sessions: Vec<Session> = state
        .services
        .sign_in
        .sessions(&caller.principal)
        .await?
        .into_iter()
        .map(|s| Session {
            current: Some(s.id) == current,
            id: s.id,
            created_at: s.created_at,
            expires_at: s.expires_at,
            ip: s.ip,
            user_agent: s.user_agent,
        })
        .collect();
    Ok(ok(sessions))
}

/// Ends one of the signed-in user's sessions.
#[utoipa::path(operation_id = "endMySession", tag = "auth", security(("bearer" = [])), params(("id" = Uuid, Path)), responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/sessions/{id}")]
pub async fn end_session(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .sign_in
        .end_session(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}

/// The signed-in user's tokens (never their secrets).
#[utoipa::path(operation_id = "listMyTokens", tag = "auth", security(("bearer" = [])), responses((status = 200, body = inline(api_types::DataEnvelope<Vec<Token>>))))]
#[get("/tokens")]
pub async fn tokens(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
) -> Result<HttpResponse, ApiError> {
    let tokens = state
        .services
        .sign_in
        .tokens(Some(caller.principal.user_id))
        .await?;
    Ok(ok(tokens
        .into_iter()
        .map(convert::token)
        .collect::<Vec<_>>()))
}

/// Creates a token for the signed-in user; the secret is in this answer only.
#[utoipa::path(operation_id = "createMyToken", tag = "auth", security(("bearer" = [])), request_body = CreateTokenRequest,
    responses((status = 201, body = inline(api_types::DataEnvelope<IssuedToken>)), (status = 400, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope)))]
#[post("/tokens")]
pub async fn create_token(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
    body: Body<CreateTokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let request = TokenRequest {
        name: body.name,
        lifetime_days: body.lifetime_days,
        plane: body.plane,
    };
    let issued = state
        .services
        .sign_in
        .create_token(
            &caller.principal,
            caller.principal.user_id,
            request,
            caller.ip(),
        )
        .await?;
    Ok(created(convert::issued(issued)))
}

/// Revokes one of the signed-in user's tokens.
#[utoipa::path(operation_id = "revokeMyToken", tag = "auth", security(("bearer" = [])), params(("id" = Uuid, Path)), responses((status = 204), (status = 404, body = ErrorEnvelope)))]
#[delete("/tokens/{id}")]
pub async fn revoke_token(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let owner = caller.principal.user_id;
    state
        .services
        .sign_in
        .revoke_token(&caller.principal, id.into_inner(), Some(owner), caller.ip())
        .await?;
    Ok(no_content())
}
