//! Accounts: users, their roles and factors as listed, invitations and
//! the one-time tokens that carry links.

use chrono::{DateTime, Utc};
use kernel::validate::Email;
use uuid::Uuid;

/// A role as seen from a user record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRef {
    /// Role id.
    pub id: Uuid,
    /// Role name.
    pub name: String,
}

/// A user account, without any secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User id.
    pub id: Uuid,
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Whether the email was verified.
    pub email_verified: bool,
    /// Deactivated accounts cannot sign in or use any credential.
    pub active: bool,
    /// IANA time zone preference.
    pub timezone: Option<String>,
    /// Roles the user is a member of.
    pub roles: Vec<RoleRef>,
    /// Some role gives API access.
    pub api_access: bool,
    /// Member of Administrators.
    pub admin: bool,
    /// The second factors set up.
    pub mfa: Factors,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// The second factors of an account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Factors {
    /// TOTP is on.
    pub totp: bool,
    /// Passkeys registered.
    pub passkeys: u32,
}

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// User id.
    pub id: Uuid,
    /// Sign-in email.
    pub email: Email,
    /// Display name.
    pub name: Option<String>,
    /// Argon2id hash, when a password was given.
    pub password_hash: Option<String>,
    /// Initial roles.
    pub role_ids: Vec<Uuid>,
    /// Whether the email counts as verified.
    pub email_verified: bool,
    /// IANA time zone preference.
    pub timezone: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Changes to a user; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct UserChanges {
    /// New display name (`Some(None)` clears it).
    pub name: Option<Option<String>>,
    /// New email.
    pub email: Option<Email>,
    /// New password hash; ends the user's other sessions.
    pub password_hash: Option<String>,
    /// Replaces the roles.
    pub role_ids: Option<Vec<Uuid>>,
    /// Activates or deactivates.
    pub active: Option<bool>,
    /// Marks the email verified or not.
    pub email_verified: Option<bool>,
    /// New time zone (`Some(None)` clears it).
    pub timezone: Option<Option<String>>,
}

/// A page of users.
#[derive(Debug, Clone)]
pub struct UserPage {
    /// The users of the page.
    pub users: Vec<User>,
    /// All users matching the search.
    pub total: u64,
}

/// Where a request came from, for sessions and the audit log.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// Client address (after trusted proxies).
    pub ip: Option<String>,
    /// The client's User-Agent.
    pub user_agent: Option<String>,
}

/// A one-time token to store (reset, verification or invitation).
#[derive(Debug, Clone)]
pub struct NewOneTimeToken {
    /// Token id.
    pub id: Uuid,
    /// What it is for.
    pub kind: crate::email::EmailKind,
    /// SHA-256 of the token.
    pub token_hash: [u8; 32],
    /// The user it acts on (reset, verification).
    pub user_id: Option<Uuid>,
    /// The invitation it accepts (invitation).
    pub invitation_id: Option<Uuid>,
    /// SHA-256 of the token's hash followed by its code (sign-in codes).
    pub code_hash: Option<[u8; 32]>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

/// A one-time token with the email that carries its link, stored together.
#[derive(Debug, Clone)]
pub struct TokenMail {
    /// The token.
    pub token: NewOneTimeToken,
    /// The email.
    pub email: crate::email::NewEmail,
}

/// A pending invitation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    /// Invitation id.
    pub id: Uuid,
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
    /// The administrator who invited them.
    pub invited_by: Option<Uuid>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

/// The audit target `kind:id`.
pub(crate) fn target(kind: &str, id: Uuid) -> Option<String> {
    Some(format!("{kind}:{id}"))
}
