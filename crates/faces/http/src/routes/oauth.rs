//! `/api/auth/oauth`: sign-in with Google, GitHub or an OpenID Connect
//! provider (API.md section 3a). Answers are redirects; only a refusal before
//! a trusted `redirect_to` is known is answered in the error envelope.

use actix_web::http::header;
use actix_web::{HttpResponse, get, web};
use api_types::{ErrorEnvelope, OAuthCallbackQuery, OAuthProvider, OAuthStartQuery};
use oauth::Callback;
use url::Url;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ClientOrigin;
use crate::respond::ok;

/// A redirect no cache or referrer keeps: it may carry a session token in its fragment.
fn redirect(to: Url) -> HttpResponse {
    HttpResponse::Found()
        .insert_header((header::LOCATION, String::from(to)))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .finish()
}

/// The providers one can sign in with now, for a sign-in page to show.
#[utoipa::path(operation_id = "listOAuthProviders", tag = "auth",
    responses((status = 200, body = inline(api_types::DataEnvelope<Vec<OAuthProvider>>))))]
#[get("/oauth")]
pub async fn providers(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let enabled = state.services.oauth.enabled().await?;
    Ok(ok(enabled
        .into_iter()
        .map(|p| OAuthProvider {
            provider: p.as_str().to_owned(),
            start_url: format!("{}/api/auth/oauth/{}", state.base_path, p.as_str()),
        })
        .collect::<Vec<_>>()))
}

/// Starts signing in with a provider: 302 to its authorize URL with `state`,
/// the PKCE challenge and (OIDC) the nonce.
#[utoipa::path(operation_id = "startOAuth", tag = "auth", params(("provider" = String, Path, description = "google, github or oidc"), OAuthStartQuery),
    responses((status = 302, description = "To the provider"),
              (status = 400, description = "redirect_to missing or not allowed", body = ErrorEnvelope),
              (status = 404, description = "Unknown or disabled provider", body = ErrorEnvelope),
              (status = 429, body = ErrorEnvelope)))]
#[get("/oauth/{provider}")]
pub async fn start(
    state: web::Data<AppState>,
    provider: web::Path<String>,
    query: web::Query<OAuthStartQuery>,
    origin: ClientOrigin,
) -> Result<HttpResponse, ApiError> {
    let to = state
        .services
        .oauth
        .start(&provider, query.redirect_to.as_deref(), &origin.0)
        .await?;
    Ok(redirect(to))
}

/// Where the provider sends the browser back: 302 to `redirect_to` with
/// `#token=<session token>`, `#mfa=<challenge>` (an account with TOTP on:
/// finish at `POST /api/auth/mfa/verify`) or `#error=<CODE>`.
#[utoipa::path(operation_id = "finishOAuth", tag = "auth", params(("provider" = String, Path, description = "google, github or oidc"), OAuthCallbackQuery),
    responses((status = 302, description = "To redirect_to, with the outcome in the fragment: token=, mfa= or error="),
              (status = 400, description = "INVALID_TOKEN: unknown, used, expired or another provider's state", body = ErrorEnvelope),
              (status = 404, description = "Unknown provider", body = ErrorEnvelope)))]
#[get("/oauth/{provider}/callback")]
pub async fn callback(
    state: web::Data<AppState>,
    provider: web::Path<String>,
    query: web::Query<OAuthCallbackQuery>,
    origin: ClientOrigin,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let callback = Callback {
        code: query.code,
        state: query.state,
        error: query.error,
    };
    let to = state
        .services
        .oauth
        .finish(&provider, callback, &origin.0)
        .await?;
    Ok(redirect(to))
}
