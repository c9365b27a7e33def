//! `/api/auth` account lifecycle: registration, password reset and change,
//! email verification, invitation acceptance. Fields sit at the top level.

use actix_web::{HttpResponse, post, web};
use api_types::{
    ChangePasswordRequest, EmailRequest, ErrorEnvelope, RegisterRequest, ResendRequest,
    TokenPasswordRequest, TokenRequest, User,
};

use crate::error::ApiError;
use crate::extract::{Body, Caller, ClientOrigin, SessionOnly};
use crate::respond::{created, no_content};
use crate::{AppState, convert};

/// Creates an account while `auth.registration_enabled` is on.
#[utoipa::path(operation_id = "register", tag = "auth", request_body = RegisterRequest,
    responses((status = 201, body = inline(api_types::DataEnvelope<User>)), (status = 400, body = ErrorEnvelope),
              (status = 403, description = "registration is off", body = ErrorEnvelope), (status = 409, body = ErrorEnvelope), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/register",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn register(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<RegisterRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let user = state
        .services
        .accounts
        .register(&b.email, &b.password, b.name, origin.0.ip)
        .await?;
    Ok(created(convert::user(user)))
}

/// Emails a reset link when the address has an account. Always 204.
#[utoipa::path(operation_id = "forgotPassword", tag = "auth", request_body = EmailRequest, responses((status = 204), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/password/forgot",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn forgot_password(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<EmailRequest>,
) -> HttpResponse {
    state
        .services
        .accounts
        .request_password_reset(body.0.email, origin.0.ip);
    no_content()
}

/// Sets a new password with the token of a reset link; ends every session.
#[utoipa::path(operation_id = "resetPassword", tag = "auth", request_body = TokenPasswordRequest,
    responses((status = 204), (status = 400, description = "INVALID_TOKEN or a bad password", body = ErrorEnvelope), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/password/reset",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn reset_password(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<TokenPasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .reset_password(&body.0.token, &body.0.password, origin.0.ip)
        .await?;
    Ok(no_content())
}

/// Changes the signed-in user's password; their other sessions end.
#[utoipa::path(operation_id = "changePassword", tag = "auth", security(("bearer" = [])), request_body = ChangePasswordRequest,
    responses((status = 204), (status = 400, description = "INVALID_CURRENT_PASSWORD or a bad new password", body = ErrorEnvelope),
              (status = 403, description = "the account has no password yet", body = ErrorEnvelope)))]
#[post("/password/change")]
pub async fn change_password(
    state: web::Data<AppState>,
    caller: Caller<SessionOnly>,
    body: Body<ChangePasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    state
        .services
        .accounts
        .change_password(
            &caller.principal,
            &b.current_password,
            &b.new_password,
            caller.ip(),
        )
        .await?;
    Ok(no_content())
}

/// Marks the email verified with the token of a verification link.
#[utoipa::path(operation_id = "verifyEmail", tag = "auth", request_body = TokenRequest,
    responses((status = 204), (status = 400, description = "INVALID_TOKEN", body = ErrorEnvelope), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/email/verify",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn verify_email(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<TokenRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .verify_email(&body.0.token, origin.0.ip)
        .await?;
    Ok(no_content())
}

/// Sends a new verification link: to the signed-in user, or (without a
/// session) to the account behind `email`. Always 204.
#[utoipa::path(operation_id = "resendVerification", tag = "auth", request_body = ResendRequest, responses((status = 204), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/email/resend",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn resend_verification(
    state: web::Data<AppState>,
    caller: Option<Caller<SessionOnly>>,
    origin: ClientOrigin,
    body: Body<ResendRequest>,
) -> HttpResponse {
    let user = caller.map(|c| c.principal.user_id);
    state
        .services
        .accounts
        .resend_verification(user, body.0.email, origin.0.ip);
    no_content()
}

/// Accepts an invitation: sets the password and creates the verified account.
#[utoipa::path(operation_id = "acceptInvitation", tag = "auth", request_body = TokenPasswordRequest,
    responses((status = 204), (status = 400, description = "INVALID_TOKEN or a bad password", body = ErrorEnvelope), (status = 409, body = ErrorEnvelope), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/invitations/accept",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn accept_invitation(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<TokenPasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .accept_invitation(&body.0.token, &body.0.password, origin.0.ip)
        .await?;
    Ok(no_content())
}
