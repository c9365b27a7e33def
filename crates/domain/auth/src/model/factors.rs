//! Second factors and their ceremonies: TOTP, recovery codes, sign-in
//! challenges, emailed codes, passkeys, and the factor gate of API.md 17.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewSession, SignInMethod, User};

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
