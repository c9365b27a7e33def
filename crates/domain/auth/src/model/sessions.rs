//! Credentials and sessions: sign-in candidates, bearer lookups, sessions
//! and personal access tokens.

use chrono::{DateTime, Utc};
use kernel::Versions;
use permissions::{Plane, Principal};
use uuid::Uuid;

use super::SecondFactor;

/// What sign-in needs to know about the account behind an email.
#[derive(Debug, Clone)]
pub struct LoginCandidate {
    /// User id.
    pub user_id: Uuid,
    /// Argon2id PHC string; `None` for an account with no password yet.
    pub password_hash: Option<String>,
    /// Deactivated accounts cannot sign in.
    pub active: bool,
    /// Whether the email was verified.
    pub email_verified: bool,
    /// This attempt's place among the sign-ins in a row that did not
    /// succeed, counted atomically when the candidate was read (attempts
    /// still running included); 0 while the account is locked.
    pub attempt: i32,
    /// Whether a lock is in force.
    pub locked: bool,
    /// Some role gives API access.
    pub api_access: bool,
    /// TOTP is on: a right password leads to a challenge.
    pub totp: bool,
    /// A passkey is registered: a right password of an administrator leads
    /// to a challenge while `auth.mfa_required_for_admins` is on.
    pub passkey: bool,
    /// Member of a role with admin access.
    pub admin: bool,
}

/// What a refused sign-in does to its account's lockout state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureEffect {
    /// Nothing: no account, or one already locked.
    Keep,
    /// Locks the account from `at` until `until` and restarts the count,
    /// unless a lock is in force at `at`.
    Lock {
        /// Now.
        at: DateTime<Utc>,
        /// End of the lock.
        until: DateTime<Utc>,
    },
    /// The password was right, so the attempt was no guess: the count restarts.
    Reset,
}

/// Which table a bearer secret is looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// `svc.sessions`.
    Session,
    /// `svc.api_tokens`.
    Token,
}

/// Where a bearer secret is looked up: its table and the SHA-256 of the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CredentialLookup {
    /// Session or token.
    pub kind: CredentialKind,
    /// The stored hash of the secret.
    pub hash: [u8; 32],
}

impl CredentialLookup {
    /// The lookup of a bearer secret (`svc_…` is a token, anything else a session).
    pub fn of(bearer: &str) -> Self {
        Self {
            kind: if crate::secret::is_api_token(bearer) {
                CredentialKind::Token
            } else {
                CredentialKind::Session
            },
            hash: crate::secret::hash_secret(bearer),
        }
    }
}

/// A credential joined with its user's state and roles, read in one round trip.
#[derive(Debug, Clone)]
pub struct CredentialRecord {
    /// Session or token id.
    pub id: Uuid,
    /// The user it acts as.
    pub user_id: Uuid,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Ended by logout, revocation or a password change.
    pub revoked: bool,
    /// The token's plane (tokens only).
    pub plane: Option<Plane>,
    /// Whether the account is active.
    pub user_active: bool,
    /// The user's roles.
    pub role_ids: Vec<Uuid>,
    /// Some role gives API access.
    pub api_access: bool,
    /// Member of Administrators.
    pub admin: bool,
    /// The user's time zone preference.
    pub timezone: Option<String>,
    /// A session that proved a second factor (at sign-in, or by enrolling
    /// the account's first); always false for a token.
    pub session_factor: bool,
}

/// A bearer credential resolved: who it stands for, as of which versions of
/// the shared state, and until when.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The caller.
    pub principal: Principal,
    /// The shared state's versions read in the same round trip.
    pub versions: Versions,
    /// When the credential stops being valid.
    pub expires_at: DateTime<Utc>,
}

/// A session to store.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Session id.
    pub id: Uuid,
    /// Its user.
    pub user_id: Uuid,
    /// SHA-256 of the session token.
    pub token_hash: [u8; 32],
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity (not extended by use).
    pub expires_at: DateTime<Utc>,
    /// Where sign-in came from.
    pub ip: Option<String>,
    /// The client's User-Agent.
    pub user_agent: Option<String>,
    /// The first step of the sign-in that made it.
    pub method: SignInMethod,
    /// The second factor it proved, if any.
    pub factor: Option<SecondFactor>,
}

/// The first step of a sign-in (API.md 17: a session knows how it was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInMethod {
    /// Email and password.
    Password,
    /// A code or link sent by email.
    EmailCode,
    /// An OAuth or OpenID provider.
    Provider,
    /// An invitation accepted.
    Invitation,
    /// A passkey on its own (two factors in one).
    Passkey,
}

impl SignInMethod {
    /// The name stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            SignInMethod::Password => "password",
            SignInMethod::EmailCode => "email_code",
            SignInMethod::Provider => "provider",
            SignInMethod::Invitation => "invitation",
            SignInMethod::Passkey => "passkey",
        }
    }

    /// The method named `name`; a stored value outside the list reads as a
    /// password (the weakest).
    pub fn parse(name: &str) -> Self {
        match name {
            "email_code" => SignInMethod::EmailCode,
            "provider" => SignInMethod::Provider,
            "invitation" => SignInMethod::Invitation,
            "passkey" => SignInMethod::Passkey,
            _ => SignInMethod::Password,
        }
    }
}

/// A live session as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Session id.
    pub id: Uuid,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Where sign-in came from.
    pub ip: Option<String>,
    /// The client's User-Agent.
    pub user_agent: Option<String>,
}

/// A personal access token to store.
#[derive(Debug, Clone)]
pub struct NewToken {
    /// Token id.
    pub id: Uuid,
    /// The user it acts as.
    pub user_id: Uuid,
    /// Label chosen by its creator.
    pub name: String,
    /// The plane it works on.
    pub plane: Plane,
    /// The first characters, kept to recognise it.
    pub prefix: String,
    /// SHA-256 of the full token.
    pub token_hash: [u8; 32],
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// The user who created it (the owner or an administrator).
    pub created_by: Uuid,
    /// The session the creator acted through, if any: the token is stored
    /// only while it is live (a claim of the account may end it meanwhile).
    pub creator_session: Option<Uuid>,
}

/// A personal access token without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// Token id.
    pub id: Uuid,
    /// The user it acts as.
    pub user_id: Uuid,
    /// Label.
    pub name: String,
    /// The plane it works on.
    pub plane: Plane,
    /// The first characters.
    pub prefix: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

/// A token just created: its record and the secret, shown once.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The stored record.
    pub info: TokenInfo,
    /// The full secret.
    pub token: String,
}
