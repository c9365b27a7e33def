//! Records of the auth domain, independent of storage and wire formats.

use chrono::{DateTime, Utc};
use kernel::Versions;
use kernel::validate::Email;
use permissions::{Plane, Principal};
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

/// A second factor a session proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondFactor {
    /// A TOTP code.
    Totp,
    /// A recovery code.
    RecoveryCode,
    /// A passkey assertion.
    Passkey,
}

impl SecondFactor {
    /// The name stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            SecondFactor::Totp => "totp",
            SecondFactor::RecoveryCode => "recovery_code",
            SecondFactor::Passkey => "passkey",
        }
    }
}

/// What the factor routes need to know of the caller (API.md 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactorGate {
    /// The account has TOTP on or a passkey.
    pub has_factor: bool,
    /// The caller's session proved a second factor.
    pub session_factor: bool,
    /// The account's email is verified.
    pub email_verified: bool,
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

/// A user's TOTP as stored.
#[derive(Debug, Clone)]
pub struct TotpRecord {
    /// The secret in use, while TOTP is on.
    pub secret: Option<Vec<u8>>,
    /// A secret waiting for its first code.
    pub pending_secret: Option<Vec<u8>>,
    /// The step of the last code accepted.
    pub last_step: Option<i64>,
}

/// What a code proved: a TOTP step (accepted once, only after the last
/// one accepted), a recovery code (by its hash, accepted once) or a
/// passkey assertion (its counter moved by compare-and-set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MfaProof {
    /// A TOTP code of this step.
    Totp {
        /// The 30 s step.
        step: i64,
    },
    /// A recovery code.
    Recovery {
        /// SHA-256 of the user's id and the code as typed, normalised.
        hash: [u8; 32],
    },
    /// A passkey's assertion that checked out.
    Passkey(PasskeyUse),
}

impl MfaProof {
    /// The factor the proof stands for.
    pub const fn factor(&self) -> SecondFactor {
        match self {
            MfaProof::Totp { .. } => SecondFactor::Totp,
            MfaProof::Recovery { .. } => SecondFactor::RecoveryCode,
            MfaProof::Passkey(_) => SecondFactor::Passkey,
        }
    }
}

/// A passkey assertion that checked out, to store by compare-and-set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyUse {
    /// The passkey.
    pub id: Uuid,
    /// Its signature counter as read before the check.
    pub sign_count: i64,
    /// Its credential after the check.
    pub credential: serde_json::Value,
    /// Its new signature counter.
    pub new_count: i64,
}

/// A sign-in challenge to store.
#[derive(Debug, Clone)]
pub struct NewMfaChallenge {
    /// Challenge id.
    pub id: Uuid,
    /// SHA-256 of the challenge secret.
    pub token_hash: [u8; 32],
    /// Its user.
    pub user_id: Uuid,
    /// The password hash the first factor verified (none: a provider or
    /// an invitation).
    pub checked_hash: Option<String>,
    /// The first step that led to it.
    pub method: SignInMethod,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

/// A live sign-in challenge, its attempt counted, with what checking its
/// code needs.
#[derive(Debug, Clone)]
pub struct MfaChallengeRecord {
    /// Its user.
    pub user_id: Uuid,
    /// The user's TOTP secret (none: turned off since).
    pub secret: Option<Vec<u8>>,
    /// The step of the last TOTP code accepted.
    pub last_step: Option<i64>,
    /// This attempt's place among the account's sign-in attempts in a row
    /// that did not succeed; 0 while a lock is in force.
    pub attempt: i64,
    /// Whether a lock is in force.
    pub locked: bool,
    /// The first step that led to it.
    pub method: SignInMethod,
}

/// What a challenge's code settles to.
#[derive(Debug, Clone)]
pub enum MfaSettle {
    /// A code that proves the factor: the session to store.
    Proof {
        /// What the code proved.
        proof: MfaProof,
        /// The session it signs in with.
        session: NewSession,
    },
    /// A wrong code, counted already: its effect.
    Wrong(MfaFailure),
}

/// How finishing a challenge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MfaFinish {
    /// The session is stored, for this user.
    Done(User),
    /// The code was used already (a TOTP step, a recovery code).
    Refused,
    /// The challenge is used, expired or dead, or the password changed.
    Gone,
}

/// What a wrong code does to its account (its attempt was counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MfaFailure {
    /// Nothing more.
    Keep,
    /// Locks the account until then (unless a lock is in force).
    Lock {
        /// End of the lock.
        until: DateTime<Utc>,
    },
}

/// The lockout rule a wrong code counts toward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lockout {
    /// Wrong attempts in a row that lock the account.
    pub threshold: i64,
    /// The end of a lock starting now.
    pub until: DateTime<Utc>,
}

/// How an emailed sign-in code is looked up.
#[derive(Debug, Clone)]
pub enum EmailCodeLookup {
    /// By the hash of its link's token.
    Link {
        /// SHA-256 of the token.
        hash: [u8; 32],
    },
    /// By the account's email and the code typed.
    Code {
        /// The email, compared case-insensitively.
        email: String,
        /// The six digits.
        code: String,
    },
}

/// How redeeming an emailed sign-in code went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailCodeOutcome {
    /// No live code matched (a wrong code counted), or the account may not
    /// sign in.
    Refused,
    /// The session is stored, for this user.
    Session(uuid::Uuid),
    /// The code is used; the account has TOTP on and goes on to a challenge.
    Challenge(uuid::Uuid),
}

/// A passkey as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyInfo {
    /// Id.
    pub id: Uuid,
    /// The owner's label.
    pub name: String,
    /// The WebAuthn credential id (never answered; new registrations
    /// exclude it).
    pub credential_id: Vec<u8>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// When it last signed in.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A verified passkey to store.
#[derive(Debug, Clone)]
pub struct NewPasskey {
    /// Its owner.
    pub user_id: Uuid,
    /// The session registering it: the passkey is stored only while it is
    /// live (a claim of the account ends it).
    pub session_id: Uuid,
    /// Shown to the owner.
    pub info: PasskeyInfo,
    /// The credential as the WebAuthn library keeps it (public key,
    /// counter, flags).
    pub credential: serde_json::Value,
}

/// How storing a passkey went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasskeyAdded {
    /// Stored.
    Added,
    /// The account holds the most passkeys it may.
    TooMany,
    /// The credential id is registered already.
    Taken,
    /// The registering session ended meanwhile (nothing stored).
    SessionEnded,
    /// Judged again under the account's lock, API.md 17 forbids adding a
    /// factor (nothing stored): the gate as read then.
    Refused(FactorGate),
}

/// How turning TOTP on went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TotpEnabled {
    /// On, with the new recovery codes.
    Enabled,
    /// The pending secret changed or TOTP was turned on meanwhile.
    PendingChanged,
    /// The confirming session ended meanwhile (nothing stored).
    SessionEnded,
    /// Judged again under the account's lock, API.md 17 forbids adding a
    /// factor (nothing stored): the gate as read then.
    Refused(FactorGate),
}

/// A WebAuthn ceremony waiting for the authenticator's answer.
#[derive(Debug, Clone)]
pub struct NewCeremony {
    /// SHA-256 of the ceremony's id.
    pub token_hash: [u8; 32],
    /// The registering account; `None` for a sign-in.
    pub user_id: Option<Uuid>,
    /// The library's state of the ceremony.
    pub state: serde_json::Value,
    /// When it stops being usable.
    pub expires_at: DateTime<Utc>,
}

/// A stored passkey that a sign-in names.
#[derive(Debug, Clone)]
pub struct StoredPasskey {
    /// Id.
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// The credential as the WebAuthn library keeps it.
    pub credential: serde_json::Value,
    /// Its signature counter as stored.
    pub sign_count: i64,
}

/// A passkey sign-in that checked out, to store with its session.
#[derive(Debug, Clone)]
pub struct PasskeySignIn {
    /// The passkey, as read before the check (its counter is compared and
    /// set).
    pub passkey: StoredPasskey,
    /// Its credential after the check.
    pub credential: serde_json::Value,
    /// Its new signature counter.
    pub sign_count: i64,
    /// Whether the account's email must be verified.
    pub require_verified: bool,
}
