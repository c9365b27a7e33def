use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::{StoreError, Versions};
use uuid::Uuid;

use crate::model::*;

/// Credentials and sessions: a bearer resolved, a sign-in's candidate and its failures, sessions made and ended.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    /// Looks a bearer secret's hash up, with its user's state and roles, in
    /// one round trip that also reads (and lets the store's caches heed) the
    /// shared state's current versions.
    async fn credential(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
    ) -> Result<(Versions, Option<CredentialRecord>), StoreError>;
    /// [`CredentialStore::credential`] with the whole user behind it, in the
    /// same round trip (`GET /api/auth/me`).
    async fn credential_with_user(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
    ) -> Result<(Versions, Option<(CredentialRecord, User)>), StoreError>;
    /// The account behind an email, compared case-insensitively, counting
    /// this sign-in attempt atomically (unless the account is locked at `now`).
    async fn login_candidate(
        &self,
        email: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<LoginCandidate>, StoreError>;
    /// Takes one attempt of `key` in a sliding 60 s window holding at most
    /// `limit` attempts, atomically for every instance. `Some(seconds)` when
    /// the window is full (the attempt is not counted): when to retry.
    async fn take_attempt(&self, key: &str, limit: u32) -> Result<Option<u64>, StoreError>;
    /// Records a refused sign-in: its effect on the account (when there is
    /// one) and its audit event.
    async fn record_login_failure(
        &self,
        user_id: Option<Uuid>,
        effect: FailureEffect,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Stores a new session and clears the failed sign-in counter, only
    /// while the account's password is still `checked_hash` (the one the
    /// sign-in verified): answers false, storing nothing, when it changed
    /// meanwhile (a reset, or a provider claiming an unverified account).
    async fn create_session(
        &self,
        session: NewSession,
        checked_hash: &str,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// Ends one live session of `user_id`; false when there is none with that id.
    async fn end_session(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// The live sessions of a user, newest first.
    async fn sessions(
        &self,
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Vec<SessionInfo>, StoreError>;
    /// The stored password hash of a user (`Some(None)`: no password yet).
    async fn password_hash(&self, user_id: Uuid) -> Result<Option<Option<String>>, StoreError>;
}

/// Users and their roles, as administrators manage them.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// One user.
    async fn user(&self, id: Uuid) -> Result<Option<User>, StoreError>;
    /// The user with an email, compared case-insensitively.
    async fn user_by_email(&self, email: &str) -> Result<Option<User>, StoreError>;
    /// A page of users, optionally matching `search` in email or name.
    async fn users(
        &self,
        search: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<UserPage, StoreError>;
    /// The members of a role; `None` when the role does not exist.
    async fn role_members(&self, role_id: Uuid) -> Result<Option<Vec<User>>, StoreError>;
    /// Creates a user with its roles, and with the token and email of `mail` when given.
    async fn create_user(
        &self,
        user: NewUser,
        mail: Option<TokenMail>,
        event: AuditEvent,
    ) -> Result<User, StoreError>;
    /// Changes a user. A new password ends every session but `keep_session`.
    /// Refuses to leave no active administrator.
    async fn update_user(
        &self,
        id: Uuid,
        changes: UserChanges,
        keep_session: Option<Uuid>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<User, StoreError>;
    /// Deletes a user and everything that belongs to them. Refuses to leave no active administrator.
    async fn delete_user(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError>;
}

/// One-time links sent by email (reset, verification, invitation) and the invitations waiting.
#[async_trait]
pub trait LinkStore: Send + Sync {
    /// Stores a one-time token and queues the email that carries it.
    async fn issue_mail(&self, mail: TokenMail, event: AuditEvent) -> Result<(), StoreError>;
    /// [`LinkStore::issue_mail`] unless `per_hour` reset and verification
    /// emails went to the same address in the last hour (counted on every
    /// instance at once), in which case only `dropped` is audited; answers
    /// whether the email was queued.
    async fn issue_capped_mail(
        &self,
        mail: TokenMail,
        event: AuditEvent,
        dropped: AuditEvent,
        per_hour: u32,
    ) -> Result<bool, StoreError>;
    /// Whether a one-time token of `kind` with this hash is unused and
    /// unexpired at `now` (looked up before any password is hashed).
    async fn token_live(
        &self,
        hash: &[u8; 32],
        kind: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Uses a live reset token: sets the password, clears the lockout and ends
    /// every session of its user. Answers the user, or `None` for a bad token.
    /// The event's actor becomes that user.
    async fn redeem_reset(
        &self,
        hash: &[u8; 32],
        password_hash: String,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Uses a live verification token: marks the email verified.
    async fn redeem_verification(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Uses a live invitation token: creates the verified user with its
    /// password and roles, and marks the invitation accepted.
    async fn redeem_invitation(
        &self,
        hash: &[u8; 32],
        password_hash: String,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Pending invitations (not accepted, not expired), newest first.
    async fn invitations(&self, now: DateTime<Utc>) -> Result<Vec<Invitation>, StoreError>;
    /// Stores an invitation with its token and email; an email with an account is a conflict.
    async fn create_invitation(
        &self,
        invitation: Invitation,
        mail: TokenMail,
        event: AuditEvent,
    ) -> Result<Invitation, StoreError>;
    /// Deletes a pending invitation; false when there is none.
    async fn delete_invitation(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
}

/// Personal access tokens.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Live tokens, of one user or of everyone.
    async fn tokens(
        &self,
        user_id: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> Result<Vec<TokenInfo>, StoreError>;
    /// Stores a new token.
    async fn create_token(
        &self,
        token: NewToken,
        event: AuditEvent,
    ) -> Result<TokenInfo, StoreError>;
    /// Revokes a token, when `owner` is given only one of theirs; false when there is none.
    async fn revoke_token(
        &self,
        id: Uuid,
        owner: Option<Uuid>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
}

/// Persistence of users and their credentials: every part, as one store.
/// Every method that changes something takes its audit event and writes
/// both in one transaction.
pub trait AuthStore:
    CredentialStore + UserStore + LinkStore + TokenStore + MfaStore + PasskeyStore + 'static
{
}

impl<T> AuthStore for T where
    T: CredentialStore
        + UserStore
        + LinkStore
        + TokenStore
        + MfaStore
        + PasskeyStore
        + 'static
        + ?Sized
{
}

/// Persistence of second factors and sign-in challenges. Every method that
/// changes something writes its audit event in the same transaction.
#[async_trait]
pub trait MfaStore: Send + Sync {
    /// A user's TOTP, if one was ever started.
    async fn totp(&self, user_id: Uuid) -> Result<Option<TotpRecord>, StoreError>;
    /// Whether `user_id` has a second factor and a verified email, and
    /// whether its session `session_id` proved a factor (false without one).
    async fn factor_gate(
        &self,
        user_id: Uuid,
        session_id: Option<Uuid>,
    ) -> Result<FactorGate, StoreError>;
    /// Stores a pending TOTP secret, replacing an older pending one; false
    /// (nothing stored) while TOTP is on.
    async fn set_pending_totp(
        &self,
        user_id: Uuid,
        secret: Vec<u8>,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// Turns TOTP on with `secret` while it is still the pending one, its
    /// code of `step` accepted, with these recovery codes (hashes) in place
    /// of older ones; `session_id` counts from then on as made with TOTP.
    /// The factor gate is read again under the account's lock first.
    #[allow(clippy::too_many_arguments)]
    async fn enable_totp(
        &self,
        user_id: Uuid,
        session_id: Option<Uuid>,
        secret: &[u8],
        step: i64,
        recovery: Vec<[u8; 32]>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<TotpEnabled, StoreError>;
    /// Uses `proof` and turns TOTP off with its recovery codes; false
    /// (nothing changed) when the proof was used already.
    async fn disable_totp(
        &self,
        user_id: Uuid,
        proof: MfaProof,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// Removes every second factor of a user and their challenges, and ends
    /// their sessions (API.md 21); false when there is no such user.
    async fn reset_mfa(&self, user_id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
    /// Stores a sign-in challenge.
    async fn create_mfa_challenge(
        &self,
        challenge: NewMfaChallenge,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Counts an attempt at the challenge with this hash, while it is
    /// unused, unexpired, has wrong codes left and its password is still
    /// the one checked, and at its account's sign-in attempts (unless a
    /// lock is in force at `now`), before any code is looked at; answers it
    /// with its user's TOTP.
    async fn take_mfa_attempt(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
    ) -> Result<Option<MfaChallengeRecord>, StoreError>;
    /// Settles the code of `user_id`'s challenge in one transaction of the
    /// same two statements whatever the code, so that a wrong code takes
    /// as long as a right one: with a proof, uses it and the challenge,
    /// stores the session (clearing the lockout) and answers the user, all
    /// or nothing; with a wrong code, applies its effect (the user is read
    /// all the same). The event is audited either way (a proof refused as
    /// used is not: the caller settles it again as wrong).
    async fn settle_mfa(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        settle: MfaSettle,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<MfaFinish, StoreError>;
    /// Uses the live sign-in code `lookup` finds on an account without a
    /// lock in force (a wrong code of a known email counts toward its 5 and
    /// toward the account's `lockout`), claims the account when its email
    /// was never verified (API.md 16) and marks it verified, and, unless
    /// the account goes on to a challenge (TOTP on, or an administrator
    /// with a passkey while `admins_need_factor`), stores `session` for its
    /// user (the event's actor becomes that user); all or nothing. Refused
    /// for an account that is inactive or without API access.
    async fn redeem_email_code(
        &self,
        lookup: EmailCodeLookup,
        admins_need_factor: bool,
        session: NewSession,
        now: DateTime<Utc>,
        lockout: Lockout,
        event: AuditEvent,
    ) -> Result<EmailCodeOutcome, StoreError>;
    /// Counts an attempt at a code outside sign-in (turning TOTP off) at
    /// the account's sign-in attempts, unless a lock is in force at `now`
    /// (then `None`): answers this attempt's place.
    async fn take_code_attempt(
        &self,
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError>;
    /// Records a wrong code (counted already): its effect and audit event.
    async fn refuse_mfa_code(
        &self,
        user_id: Uuid,
        effect: MfaFailure,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
}

/// Persistence of passkeys and of the WebAuthn ceremonies in flight.
#[async_trait]
pub trait PasskeyStore: Send + Sync {
    /// A user's passkeys, oldest first.
    async fn passkeys(&self, user_id: Uuid) -> Result<Vec<PasskeyInfo>, StoreError>;
    /// Stores a ceremony, dropping some of the ones expired at `now` and,
    /// for a registration, the account's older registration; a sign-in's
    /// only while fewer than `limit` sign-ins are stored (false: nothing
    /// stored).
    async fn start_ceremony(
        &self,
        ceremony: NewCeremony,
        limit: u32,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Takes (deletes) the live registration of `user_id` whose id hashes
    /// to `hash`: its state.
    async fn take_registration(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<serde_json::Value>, StoreError>;
    /// Stores a verified passkey, at most `limit` per account, audited.
    async fn add_passkey(
        &self,
        passkey: NewPasskey,
        limit: u32,
        event: AuditEvent,
    ) -> Result<PasskeyAdded, StoreError>;
    /// Takes (deletes) the live sign-in ceremony whose id hashes to `hash`,
    /// in the round trip that reads the passkey of `user_id` with
    /// `credential_id`: the ceremony's state and the passkey, if any.
    async fn take_login(
        &self,
        hash: &[u8; 32],
        credential_id: &[u8],
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<(serde_json::Value, Option<StoredPasskey>)>, StoreError>;
    /// Stores a passkey sign-in: the passkey's new counter by
    /// compare-and-set and the session, while the account is active, has
    /// API access (and a verified email when required); the event's actor
    /// is the owner. Answers the user, or `None` (nothing stored).
    async fn sign_in_with_passkey(
        &self,
        used: PasskeySignIn,
        session: NewSession,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<User>, StoreError>;
    /// The user of the live sign-in challenge whose secret hashes to
    /// `hash` (its password unchanged) with the credentials of its
    /// passkeys, without counting an attempt.
    async fn challenge_passkeys(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
    ) -> Result<Option<(Uuid, Vec<serde_json::Value>)>, StoreError>;
    /// Stores the passkey ceremony of a sign-in challenge (keyed by the
    /// challenge's hash, replacing an older one of it), dropping some
    /// expired ones; false when its account is gone.
    async fn park_challenge_ceremony(
        &self,
        ceremony: NewCeremony,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Takes (deletes) the live passkey ceremony of the challenge hashing
    /// to `hash` of `user_id`, with that user's passkey `credential_id`.
    async fn take_challenge_ceremony(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        credential_id: &[u8],
        now: DateTime<Utc>,
    ) -> Result<Option<(serde_json::Value, Option<StoredPasskey>)>, StoreError>;
    /// Removes a passkey of `user_id`; false when there is none with that id.
    async fn delete_passkey(
        &self,
        user_id: Uuid,
        id: Uuid,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
}
