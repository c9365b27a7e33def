//! `/api/auth/mfa`: TOTP enrollment of the signed-in user, and the second
//! step of a sign-in that answered MFA_REQUIRED; `/api/auth/email-code`:
//! sign-in with a code sent by email (API.md 14).

use actix_web::{HttpResponse, delete, get, post, web};
use api_types::{
    EmailRequest, ErrorEnvelope, LoginResponse, MfaChallengeRequest, MfaCodeRequest,
    MfaPasskeyOptions, RecoveryCodes, SignInMethods, TotpEnrollment, VerifyEmailCodeRequest,
    VerifyMfaRequest,
};
use auth::EmailCodeProof;

use crate::error::ApiError;
use crate::extract::{Body, Caller, ClientOrigin, Enrolling};
use crate::respond::{no_content, ok};
use crate::{AppState, convert};

/// Starts a TOTP enrollment: a new pending secret (replacing an older
/// pending one) and its `otpauth://` URL. Refused while TOTP is on.
#[utoipa::path(operation_id = "startTotp", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = inline(api_types::DataEnvelope<TotpEnrollment>)),
              (status = 401, body = ErrorEnvelope),
              (status = 409, description = "TOTP is already on", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post("/mfa/totp")]
pub async fn start_totp(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
) -> Result<HttpResponse, ApiError> {
    let enrollment = state
        .services
        .sign_in
        .start_totp(&caller.principal, &caller.origin)
        .await?;
    Ok(ok(TotpEnrollment {
        qr_svg: qr_svg(&enrollment.otpauth_url),
        secret: enrollment.secret,
        otpauth_url: enrollment.otpauth_url,
    }))
}

/// `text` as a QR code, an SVG document (empty if it cannot be one).
fn qr_svg(text: &str) -> String {
    qrcode::QrCode::new(text.as_bytes())
        .map(|code| {
            code.render::<qrcode::render::svg::Color<'_>>()
                .min_dimensions(200, 200)
                .quiet_zone(true)
                .build()
        })
        .unwrap_or_default()
}

/// Turns TOTP on with a code of the pending secret; answers the recovery
/// codes, shown this once.
#[utoipa::path(operation_id = "confirmTotp", tag = "auth", security(("bearer" = [])), request_body = MfaCodeRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<RecoveryCodes>)),
              (status = 400, description = "INVALID_MFA_CODE", body = ErrorEnvelope),
              (status = 401, body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post("/mfa/totp/confirm")]
pub async fn confirm_totp(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
    origin: ClientOrigin,
    body: Body<MfaCodeRequest>,
) -> Result<HttpResponse, ApiError> {
    let recovery_codes = state
        .services
        .sign_in
        .confirm_totp(&caller.principal, &body.0.code, &origin.0)
        .await?;
    Ok(ok(RecoveryCodes { recovery_codes }))
}

/// Turns TOTP off, given one of its codes or an unused recovery code.
#[utoipa::path(operation_id = "disableTotp", tag = "auth", security(("bearer" = [])), request_body = MfaCodeRequest,
    responses((status = 204),
              (status = 400, description = "INVALID_MFA_CODE", body = ErrorEnvelope),
              (status = 401, body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[delete("/mfa/totp")]
pub async fn disable_totp(
    state: web::Data<AppState>,
    caller: Caller<Enrolling>,
    origin: ClientOrigin,
    body: Body<MfaCodeRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .sign_in
        .disable_totp(&caller.principal, &body.0.code, &origin.0)
        .await?;
    Ok(no_content())
}

/// The options to finish a sign-in that answered MFA_REQUIRED with a
/// passkey of that account (single-use, 5 minutes; a newer call replaces
/// them).
#[utoipa::path(operation_id = "startMfaPasskey", tag = "auth", request_body = MfaChallengeRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<MfaPasskeyOptions>)),
              (status = 400, description = "INVALID_TOKEN: an unknown, used, expired or dead challenge; INVALID_PAYLOAD: the account has no passkey", body = ErrorEnvelope),
              (status = 409, description = "No relying party can be set up (see auth.passkey_rp_id)", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post(
    "/mfa/passkey",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn start_passkey(
    state: web::Data<AppState>,
    body: Body<MfaChallengeRequest>,
) -> Result<HttpResponse, ApiError> {
    let options = state
        .services
        .passkeys
        .mfa_options(&body.0.challenge)
        .await?;
    Ok(ok(MfaPasskeyOptions { options }))
}

/// Finishes a sign-in that answered MFA_REQUIRED with a TOTP code, an
/// unused recovery code or a passkey assertion (`credential`): answers
/// what the sign-in would have.
#[utoipa::path(operation_id = "verifyMfa", tag = "auth", request_body = VerifyMfaRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<LoginResponse>)),
              (status = 400, description = "INVALID_TOKEN: an unknown, used, expired or dead challenge; INVALID_PAYLOAD: neither or both of code and credential", body = ErrorEnvelope),
              (status = 401, description = "INVALID_MFA_CODE (a wrong code or an assertion that does not check out)", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post(
    "/mfa/verify",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn verify(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<VerifyMfaRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let (token, user) = match (body.code, body.credential) {
        (Some(code), None) => {
            state
                .services
                .sign_in
                .verify_mfa(&body.challenge, &code, origin.0)
                .await?
        }
        (None, Some(credential)) => {
            state
                .services
                .passkeys
                .verify_mfa(&body.challenge, credential, origin.0)
                .await?
        }
        _ => {
            return Err(ApiError::from(kernel::FieldError::new(
                "code",
                "give a code or a passkey credential (one of them)",
            )));
        }
    };
    Ok(ok(LoginResponse {
        token,
        user: convert::user(user),
    }))
}

/// Sends a sign-in code, while `auth.email_code_enabled` is on, to an
/// active account with API access. Always 204, whatever the address.
#[utoipa::path(operation_id = "requestEmailCode", tag = "auth", request_body = EmailRequest,
    responses((status = 204), (status = 429, description = "Too many account calls from this address", body = ErrorEnvelope)))]
#[post(
    "/email-code",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn request_email_code(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<EmailRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .accounts
        .request_email_code(body.0.email, origin.0.ip)
        .await?;
    Ok(no_content())
}

/// Signs in with the emailed link's `token`, or the `email` and its
/// `code`: answers what a sign-in would have (MFA_REQUIRED for an account
/// with TOTP on). Every failure is 400 INVALID_TOKEN.
#[utoipa::path(operation_id = "verifyEmailCode", tag = "auth", request_body = VerifyEmailCodeRequest,
    responses((status = 200, body = inline(api_types::DataEnvelope<LoginResponse>)),
              (status = 400, description = "INVALID_TOKEN", body = ErrorEnvelope),
              (status = 401, description = "MFA_REQUIRED, with the challenge", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[post(
    "/email-code/verify",
    wrap = "actix_web::middleware::from_fn(crate::middleware::account_rate_limit)"
)]
pub async fn verify_email_code(
    state: web::Data<AppState>,
    origin: ClientOrigin,
    body: Body<VerifyEmailCodeRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let proof = match (&body.token, &body.email, &body.code) {
        (Some(token), None, None) => EmailCodeProof::Link(token),
        (None, Some(email), Some(code)) => EmailCodeProof::Code { email, code },
        _ => EmailCodeProof::Link(""),
    };
    let (token, user) = state
        .services
        .sign_in
        .verify_email_code(proof, origin.0)
        .await?;
    Ok(ok(LoginResponse {
        token,
        user: convert::user(user),
    }))
}

/// The ways to sign in besides the password, for a sign-in page to offer.
#[utoipa::path(operation_id = "listSignInMethods", tag = "auth",
    responses((status = 200, body = inline(api_types::DataEnvelope<SignInMethods>))))]
#[get("/methods")]
pub async fn methods(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let settings = state.services.settings.heeded().await?;
    Ok(ok(SignInMethods {
        email_code: settings.email_code_enabled(),
        passkeys: state.services.passkeys.available().await?,
    }))
}
