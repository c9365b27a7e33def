//! `/api/auth/passkeys`: a signed-in person's passkeys, and sign-in with
//! one (API.md 14).

use actix_web::{HttpResponse, delete, get, post, web};
use api_types::{ErrorEnvelope, FinishPasskeyLogin, FinishPasskeyRegistration, LoginResponse};
use auth::{CeremonyStart, PasskeyInfo};
use uuid::Uuid;

use crate::error::ApiError;
use crate::extract::{Body, Caller, ClientOrigin, Enrolling};
use crate::respond::{created, no_content, ok};
use crate::{AppState, convert};

fn ceremony(start: CeremonyStart) -> api_types::PasskeyCeremony {
    api_types::PasskeyCeremony {
        challenge_id: start.challenge_id,
        options: start.options,
    }
}

fn passkey(p: PasskeyInfo) -> api_types::Passkey {
    api_types::Passkey {
        id: p.id,
        name: p.name,
        created_at: p.created_at,
        last_used_at: p.last_used_at,
    }
}

/// Starts registering a passkey for the signed-in person: the options for
/// `navigator.credentials.create`.
#[utoipa::path(operation_id = "startPasskeyRegistration", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = inline(api_types::DataEnvelope<api_types::PasskeyCeremony>)),
              (status = 401, body = ErrorEnvelope),
              (status = 409, description = "No relying party can be set up (see auth.passkey_rp_id)", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post("/passkeys/register/start")]
pub async fn start_registration(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
) -> Result<HttpResponse, ApiError> {
    let start = state
        .services
        .passkeys
        .start_registration(&caller.principal, &caller.origin)
        .await?;
    Ok(ok(ceremony(start)))
}

/// Finishes a registration with the authenticator's answer: the passkey
/// stored. An answer that does not check out is 400 and stores nothing.
#[utoipa::path(operation_id = "finishPasskeyRegistration", tag = "auth", security(("bearer" = [])),
    request_body = FinishPasskeyRegistration,
    responses((status = 201, body = inline(api_types::DataEnvelope<api_types::Passkey>)),
              (status = 400, description = "INVALID_PAYLOAD: the answer, the challenge or the name", body = ErrorEnvelope),
              (status = 401, body = ErrorEnvelope),
              (status = 409, description = "Too many passkeys, or no relying party", body = ErrorEnvelope)))]
#[post("/passkeys/register/finish")]
pub async fn finish_registration(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
    body: Body<FinishPasskeyRegistration>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let added = state
        .services
        .passkeys
        .finish_registration(
            &caller.principal,
            &body.challenge_id,
            body.credential,
            body.name.as_deref(),
            &caller.origin,
        )
        .await?;
    Ok(created(passkey(added)))
}

/// The signed-in person's passkeys, oldest first.
#[utoipa::path(operation_id = "listPasskeys", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<api_types::Passkey>>)),
              (status = 401, body = ErrorEnvelope)))]
#[get("/passkeys")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
) -> Result<HttpResponse, ApiError> {
    let all = state.services.passkeys.list(&caller.principal).await?;
    Ok(ok(all.into_iter().map(passkey).collect::<Vec<_>>()))
}

/// Removes one of the signed-in person's passkeys.
#[utoipa::path(operation_id = "removePasskey", tag = "auth", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204), (status = 401, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
#[delete("/passkeys/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .passkeys
        .remove(&caller.principal, id.into_inner(), &caller.origin)
        .await?;
    Ok(no_content())
}

/// Starts a sign-in with a passkey the browser finds itself (no email
/// asked): the options for `navigator.credentials.get`.
#[utoipa::path(operation_id = "startPasskeyLogin", tag = "auth",
    responses((status = 200, body = inline(api_types::DataEnvelope<api_types::PasskeyCeremony>)),
              (status = 409, description = "No relying party can be set up (see auth.passkey_rp_id)", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post(
    "/passkeys/login/start",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn start_login(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let start = state.services.passkeys.start_login().await?;
    Ok(ok(ceremony(start)))
}

/// Finishes a passkey sign-in: answers what a sign-in answers. Every
/// failure is 401 AUTHENTICATION_REQUIRED "Invalid email or password".
#[utoipa::path(operation_id = "finishPasskeyLogin", tag = "auth", request_body = FinishPasskeyLogin,
    responses((status = 200, body = inline(api_types::DataEnvelope<LoginResponse>)),
              (status = 401, description = "AUTHENTICATION_REQUIRED, whatever failed", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post(
    "/passkeys/login/finish",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn finish_login(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<FinishPasskeyLogin>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let (token, user) = state
        .services
        .passkeys
        .finish_login(&body.challenge_id, body.credential, origin.0)
        .await?;
    Ok(ok(LoginResponse {
        token,
        user: convert::user(user),
    }))
}
