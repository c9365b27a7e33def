//! The account routes: registration, password reset and change, email verification, invitations.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// `POST /api/auth/register` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RegisterRequest {
    /// Sign-in email.
    pub email: String,
    /// Password (at least `auth.password_min_length` characters).
    pub password: String,
    /// Display name.
    pub name: Option<String>,
}

/// A body with only an email (`password/forgot`, `email/resend`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct EmailRequest {
    /// The account's email.
    pub email: String,
}

/// `POST /api/auth/email/resend` body; the email is needed only without a session.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResendRequest {
    /// The account's email (without a session).
    pub email: Option<String>,
}

/// A body with a one-time token (`email/verify`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenRequest {
    /// The token from the emailed link.
    pub token: String,
}

/// A one-time token with a new password (`password/reset`, `invitations/accept`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenPasswordRequest {
    /// The token from the emailed link.
    pub token: String,
    /// The new password.
    pub password: String,
}

/// `POST /api/auth/password/change` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangePasswordRequest {
    /// The password in use.
    pub current_password: String,
    /// The new password.
    pub new_password: String,
}

/// `POST /admin/api/invitations` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateInvitationRequest {
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
}

/// A pending invitation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    /// Invitation id.
    pub id: Uuid,
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}
