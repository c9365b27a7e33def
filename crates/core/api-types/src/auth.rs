//! Sign-in, the caller's own account, sessions, providers and tokens.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::*;

/// A role as listed on a user.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleRef {
    /// Role id.
    pub id: Uuid,
    /// Role name.
    pub name: String,
}

/// A user account.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// User id.
    pub id: Uuid,
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Whether the email was verified.
    pub email_verified: bool,
    /// Deactivated accounts cannot sign in.
    pub active: bool,
    /// IANA time zone preference.
    pub timezone: Option<String>,
    /// Roles of the user.
    pub roles: Vec<RoleRef>,
    /// The second factors set up.
    pub mfa: UserMfa,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// The second factors of a user.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserMfa {
    /// TOTP is on.
    pub totp: bool,
    /// Passkeys registered.
    pub passkeys: u32,
}

/// `POST /api/auth/mfa/totp` answer: a pending TOTP secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TotpEnrollment {
    /// The secret, base32 (RFC 4648, no padding).
    pub secret: String,
    /// The `otpauth://totp/...` URL authenticator apps read, as a QR code.
    pub otpauth_url: String,
    /// That URL as a QR code, an SVG document (for the account page).
    pub qr_svg: String,
}

/// A second-factor code: six TOTP digits, or a recovery code where the
/// route takes one.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MfaCodeRequest {
    /// The code.
    pub code: String,
}

/// `POST /api/auth/mfa/totp/confirm` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryCodes {
    /// Ten single-use codes, shown this once.
    pub recovery_codes: Vec<String>,
}

/// `POST /api/auth/email-code/verify` body: the emailed link's `token`, or
/// the `email` with the `code` typed.
#[derive(Debug, Deserialize, ToSchema)]
pub struct VerifyEmailCodeRequest {
    /// The token of the emailed link.
    pub token: Option<String>,
    /// The account's email, with `code`.
    pub email: Option<String>,
    /// The six digits of the email, with `email`.
    pub code: Option<String>,
}

/// `GET /api/auth/methods` answer: the ways to sign in a sign-in page
/// offers besides the password (providers: `GET /api/auth/oauth`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignInMethods {
    /// A code sent by email (`auth.email_code_enabled`).
    pub email_code: bool,
    /// Passkeys: the relying party is set (`auth.passkey_rp_id`,
    /// `auth.passkey_origins` or a public URL with a domain name).
    pub passkeys: bool,
}

/// A WebAuthn ceremony started: its id and the `publicKey` options for
/// `navigator.credentials.create` or `.get`, binary fields base64url.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasskeyCeremony {
    /// The id that finishes the ceremony (single-use, 5 minutes).
    pub challenge_id: String,
    /// The `publicKey` options.
    #[schema(value_type = Object)]
    pub options: serde_json::Value,
}

/// `POST /api/auth/passkeys/register/finish` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishPasskeyRegistration {
    /// The ceremony's id.
    pub challenge_id: String,
    /// The new credential, as `PublicKeyCredential.toJSON()` gives it.
    #[schema(value_type = Object)]
    pub credential: serde_json::Value,
    /// A label (default "Passkey").
    pub name: Option<String>,
}

/// `POST /api/auth/passkeys/login/finish` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FinishPasskeyLogin {
    /// The ceremony's id.
    pub challenge_id: String,
    /// The assertion, as `PublicKeyCredential.toJSON()` gives it.
    #[schema(value_type = Object)]
    pub credential: serde_json::Value,
}

/// A passkey of the signed-in person.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Passkey {
    /// Id.
    pub id: Uuid,
    /// Label.
    pub name: String,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// When it last signed in.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// `POST /api/auth/mfa/verify` body: the challenge with a code or a
/// passkey assertion.
#[derive(Debug, Deserialize, ToSchema)]
pub struct VerifyMfaRequest {
    /// The challenge of the MFA_REQUIRED answer.
    pub challenge: String,
    /// A TOTP code or an unused recovery code.
    #[serde(default)]
    pub code: Option<String>,
    /// A passkey assertion (`PublicKeyCredential.toJSON()`) answering the
    /// options of `POST /api/auth/mfa/passkey`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub credential: Option<serde_json::Value>,
}

/// `POST /api/auth/mfa/passkey` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MfaChallengeRequest {
    /// The challenge of the MFA_REQUIRED answer.
    pub challenge: String,
}

/// The options to finish a sign-in challenge with a passkey.
#[derive(Debug, Serialize, ToSchema)]
pub struct MfaPasskeyOptions {
    /// The `publicKey` options for `navigator.credentials.get`, binary
    /// fields base64url, limited to the account's passkeys.
    #[schema(value_type = Object)]
    pub options: serde_json::Value,
}

/// `POST /api/auth/login` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginRequest {
    /// Sign-in email.
    pub email: String,
    /// Password.
    pub password: String,
}

/// Answer of a successful sign-in.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginResponse {
    /// The session token, to send as `Authorization: Bearer <token>`.
    pub token: String,
    /// The signed-in user.
    pub user: User,
}

/// `PATCH /api/auth/me` body; null clears a field.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateMeRequest {
    /// Display name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub name: Option<Option<String>>,
    /// IANA time zone name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub timezone: Option<Option<String>>,
}

/// A live session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Session id.
    pub id: Uuid,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Whether this is the session of the request.
    pub current: bool,
    /// Where sign-in came from.
    pub ip: Option<String>,
    /// The client's User-Agent.
    pub user_agent: Option<String>,
}

/// A provider one can sign in with (`GET /api/auth/oauth`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuthProvider {
    /// `google`, `github` or `oidc`.
    pub provider: String,
    /// Where a browser starts signing in with it (add `?redirect_to=`).
    pub start_url: String,
}

/// Query of `GET /api/auth/oauth/{provider}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OAuthStartQuery {
    /// Where the browser returns with `#token=` or `#error=`; its origin must
    /// be the public URL's, the email links' or one of `auth.redirect_allow_list`.
    pub redirect_to: Option<String>,
}

/// Query of `GET /api/auth/oauth/{provider}/callback`, as the provider sends it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OAuthCallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the flow was started with.
    pub state: Option<String>,
    /// The provider's error, when sign-in was refused there.
    pub error: Option<String>,
}

/// An identity of a provider linked to a user.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkedIdentity {
    /// Identity id.
    pub id: Uuid,
    /// `google`, `github` or `oidc`.
    pub provider: String,
    /// The provider's stable id of the person.
    pub subject: String,
    /// The email the provider gave last.
    pub email: Option<String>,
    /// When it was linked.
    pub created_at: DateTime<Utc>,
    /// When it last signed in.
    pub last_used_at: DateTime<Utc>,
}

/// `POST /api/auth/tokens` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTokenRequest {
    /// Label.
    pub name: String,
    /// Lifetime in days, 1 to 3650.
    pub lifetime_days: i64,
    /// `API` or `ADMIN`.
    pub plane: String,
}

/// `POST /admin/api/tokens` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminCreateTokenRequest {
    /// The owner.
    pub user_id: Uuid,
    /// Label.
    pub name: String,
    /// Lifetime in days, 1 to 3650.
    pub lifetime_days: i64,
    /// `API` or `ADMIN`.
    pub plane: String,
}

/// A personal access token, without its secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    /// Token id.
    pub id: Uuid,
    /// The owner.
    pub user_id: Uuid,
    /// Label.
    pub name: String,
    /// `API` or `ADMIN`.
    pub plane: String,
    /// The first characters of the token.
    pub prefix: String,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A token just created; `token` is the full secret, shown only here.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedToken {
    /// The token record.
    #[serde(flatten)]
    pub record: Token,
    /// The full secret.
    pub token: String,
}
