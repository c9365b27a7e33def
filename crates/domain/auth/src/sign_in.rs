//! Sign-in and the credentials it hands out: the resolver of every bearer
//! secret, sign-in with lockout and rate limits, sessions and personal
//! access tokens.

use std::sync::Arc;

use audit::{Actor, AuditEvent};
use chrono::{DateTime, Duration, Utc};
use kernel::settings::Settings;
use kernel::validate::short_text;
use kernel::{Clock, FieldError, new_id};
use permissions::{Credential, Plane, Principal};
use serde_json::json;
use settings::SettingsService;
use uuid::Uuid;

use crate::model::*;
use crate::secret;
use crate::{AuthError, AuthStore, HashPool};

/// Whether a first step that passed goes on to a second-factor challenge:
/// always with TOTP on, and for an administrator with a passkey while
/// `auth.mfa_required_for_admins` is on (API.md 17).
pub fn needs_second_step(settings: &Settings, totp: bool, passkey: bool, admin: bool) -> bool {
    totp || (passkey && admin && settings.mfa_required_for_admins())
}

/// Longest token lifetime, in days.
pub const MAX_TOKEN_DAYS: i64 = 3650;
/// Longest token label, in characters.
const TOKEN_NAME_MAX: usize = 100;

/// Sign-in and credentials: who a bearer secret stands for, sessions and
/// tokens.
#[derive(Clone)]
pub struct SignInService {
    pub(crate) store: Arc<dyn AuthStore>,
    pub(crate) settings: SettingsService,
    pub(crate) clock: Arc<dyn Clock>,
    /// Where passwords are verified, with bounded memory.
    pub(crate) hasher: HashPool,
}

/// Input of a token creation, before validation.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// Label.
    pub name: String,
    /// Lifetime in days (1..=3650).
    pub lifetime_days: i64,
    /// `API` or `ADMIN`.
    pub plane: String,
}

fn ttl(hours: f64) -> Duration {
    // Fractional hours are allowed; the settings registry caps the value.
    #[allow(clippy::cast_possible_truncation)]
    Duration::milliseconds((hours * 3_600_000.0).round() as i64)
}

impl SignInService {
    /// A service over `store`, reading time from `clock`; passwords are
    /// verified on `hasher` (shared with the account service).
    pub fn new(
        store: Arc<dyn AuthStore>,
        settings: SettingsService,
        clock: Arc<dyn Clock>,
        hasher: HashPool,
    ) -> Self {
        Self {
            store,
            settings,
            clock,
            hasher,
        }
    }

    /// The pool that hashes passwords (its peak concurrency is observable).
    pub fn hash_pool(&self) -> &HashPool {
        &self.hasher
    }

    /// The time of the service's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Resolves a bearer secret to the caller, reading the user's state and
    /// roles afresh (one database round trip).
    pub async fn authenticate(&self, bearer: &str) -> Result<Principal, AuthError> {
        Ok(self.resolve(bearer).await?.principal)
    }

    /// The caller `bearer` stands for, with its user, in one round trip
    /// (`GET /api/auth/me`).
    pub async fn me(&self, bearer: &str) -> Result<(Principal, User), AuthError> {
        let lookup = CredentialLookup::of(bearer);
        let (_, found) = self
            .store
            .credential_with_user(lookup.kind, &lookup.hash)
            .await?;
        let (record, user) = found.ok_or(AuthError::AuthenticationRequired)?;
        Ok((self.principal(lookup.kind, record)?, user))
    }

    /// [`SignInService::authenticate`], also answering the shared state's
    /// versions read in the same round trip and the credential's end. An
    /// administrator's session that proved no second factor is refused
    /// while `auth.mfa_required_for_admins` is on.
    pub async fn resolve(&self, bearer: &str) -> Result<Resolved, AuthError> {
        let (resolved, unenrolled) = self.resolve_any(bearer).await?;
        // The settings as of the versions the lookup just read.
        if unenrolled && self.settings.current().await?.mfa_required_for_admins() {
            return Err(AuthError::MfaEnrollmentRequired);
        }
        Ok(resolved)
    }

    /// [`SignInService::resolve`] for the routes an administrator without
    /// a second factor may still reach: signing out and enrolling one.
    pub async fn resolve_enrolling(&self, bearer: &str) -> Result<Resolved, AuthError> {
        Ok(self.resolve_any(bearer).await?.0)
    }

    /// The credential resolved, and whether it is an administrator's
    /// session that proved no second factor.
    async fn resolve_any(&self, bearer: &str) -> Result<(Resolved, bool), AuthError> {
        let lookup = CredentialLookup::of(bearer);
        let (versions, record) = self.store.credential(lookup.kind, &lookup.hash).await?;
        let record = record.ok_or(AuthError::AuthenticationRequired)?;
        let (session_factor, expires_at) = (record.session_factor, record.expires_at);
        let principal = self.principal(lookup.kind, record)?;
        let unenrolled = principal.admin && principal.session_id().is_some() && !session_factor;
        Ok((
            Resolved {
                expires_at,
                principal,
                versions,
            },
            unenrolled,
        ))
    }

    /// The caller a credential record stands for, or why it is refused.
    fn principal(
        &self,
        kind: CredentialKind,
        record: CredentialRecord,
    ) -> Result<Principal, AuthError> {
        let expired = record.revoked || record.expires_at <= self.now();
        let credential = match (kind, record.plane) {
            (CredentialKind::Session, _) if expired => return Err(AuthError::SessionExpired),
            (CredentialKind::Session, _) => Credential::Session { id: record.id },
            (CredentialKind::Token, Some(plane)) if !expired => Credential::Token {
                id: record.id,
                plane,
            },
            (CredentialKind::Token, _) => return Err(AuthError::AuthenticationRequired),
        };
        if !record.user_active {
            return Err(AuthError::AuthenticationRequired);
        }
        Ok(Principal {
            user_id: record.user_id,
            credential,
            role_ids: record.role_ids,
            api_access: record.api_access,
            admin: record.admin,
            timezone: record.timezone,
        })
    }

    /// Counts a sign-in attempt of `origin`'s address against
    /// `auth.login_rate_limit_per_minute` (shared by every instance).
    pub async fn take_sign_in_attempt(
        &self,
        settings: &Settings,
        origin: &Origin,
    ) -> Result<(), AuthError> {
        self.take_rate("login", settings.login_rate_limit_per_minute(), origin)
            .await
    }

    /// Counts a call of a public account route (register, password forgot
    /// and reset, email verify and resend, invitation accept) of `origin`'s
    /// address against `auth.account_rate_limit_per_minute`, one window for
    /// all of them, shared by every instance.
    pub async fn take_account_call(&self, origin: &Origin) -> Result<(), AuthError> {
        let settings = self.settings.heeded().await?;
        self.take_rate("account", settings.account_rate_limit_per_minute(), origin)
            .await
    }

    /// Takes one call of `origin`'s address from the window `bucket` holding
    /// `limit` calls per 60 s (0: no limit).
    async fn take_rate(&self, bucket: &str, limit: u32, origin: &Origin) -> Result<(), AuthError> {
        if limit > 0 {
            let source = format!("{bucket}:{}", origin.ip.as_deref().unwrap_or("unknown"));
            if let Some(retry_after) = self.store.take_attempt(&source, limit).await? {
                return Err(AuthError::RateLimited { retry_after });
            }
        }
        Ok(())
    }

    /// A new session of `user_id` made by `method` for `origin` (not stored
    /// yet, no second factor proved) and its token.
    pub fn new_session(
        &self,
        user_id: Uuid,
        method: SignInMethod,
        settings: &Settings,
        origin: &Origin,
    ) -> (String, NewSession) {
        let token = secret::new_session_token();
        let now = self.now();
        let session = NewSession {
            id: new_id(),
            user_id,
            token_hash: secret::hash_secret(&token),
            created_at: now,
            expires_at: now + ttl(settings.session_ttl_hours()),
            ip: origin.ip.clone(),
            user_agent: origin
                .user_agent
                .as_deref()
                .map(|ua| ua.chars().take(512).collect()),
            method,
            factor: None,
        };
        (token, session)
    }

    /// Signs in with email and password. Every failure but an unverified
    /// email answers the same, after the same argon2 work; an account with
    /// TOTP on answers a challenge instead of a session.
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.settings.heeded().await?;
        self.take_sign_in_attempt(&settings, &origin).await?;
        let now = self.now();
        let candidate = if email.len() <= kernel::validate::EMAIL_MAX {
            self.store.login_candidate(email.trim(), now).await?
        } else {
            None
        };
        let stored_hash = candidate.as_ref().and_then(|c| c.password_hash.clone());
        let password_ok = self.hasher.verify(password.to_owned(), stored_hash).await?;
        let failed = |user_id: Option<Uuid>, reason: &'static str| {
            let actor = user_id.map_or(Actor::UNKNOWN_USER, Actor::user);
            AuditEvent::new(
                actor,
                "auth.login_failed",
                user_id.and_then(|id| target("user", id)),
                origin.ip.clone(),
            )
            .with_details(json!({ "email": email.trim(), "reason": reason }))
        };
        let Some(candidate) = candidate else {
            self.store
                .record_login_failure(None, FailureEffect::Keep, failed(None, "unknown_email"))
                .await?;
            return Err(AuthError::InvalidCredentials);
        };
        let user_id = candidate.user_id;
        let threshold = settings.lockout_threshold();
        let lock = FailureEffect::Lock {
            at: now,
            until: now + Duration::minutes(settings.lockout_minutes()),
        };
        // Attempts are counted before the password is checked, so however many
        // run at once, at most `threshold` passwords are tried before the lock.
        let refusal = if candidate.locked {
            Some((FailureEffect::Keep, "locked", AuthError::InvalidCredentials))
        } else if candidate.attempt > threshold {
            Some((lock, "over_threshold_locked", AuthError::InvalidCredentials))
        } else if !password_ok && candidate.attempt >= threshold {
            Some((lock, "wrong_password_locked", AuthError::InvalidCredentials))
        } else if !password_ok {
            Some((
                FailureEffect::Keep,
                "wrong_password",
                AuthError::InvalidCredentials,
            ))
        } else if !candidate.active {
            Some((
                FailureEffect::Reset,
                "inactive",
                AuthError::InvalidCredentials,
            ))
        } else if !candidate.api_access {
            Some((
                FailureEffect::Reset,
                "no_api_access",
                AuthError::InvalidCredentials,
            ))
        } else if settings.email_verification_required() && !candidate.email_verified {
            Some((
                FailureEffect::Reset,
                "email_not_verified",
                AuthError::EmailNotVerified,
            ))
        } else {
            None
        };
        if let Some((effect, reason, error)) = refusal {
            self.store
                .record_login_failure(Some(user_id), effect, failed(Some(user_id), reason))
                .await?;
            return Err(error);
        }
        // Only after the right password: MFA_REQUIRED tells nothing else.
        if needs_second_step(
            &settings,
            candidate.totp,
            candidate.passkey,
            candidate.admin,
        ) {
            let challenge = self
                .mfa_challenge(
                    user_id,
                    SignInMethod::Password,
                    candidate.password_hash,
                    &origin,
                )
                .await?;
            return Err(AuthError::MfaRequired { challenge });
        }
        let (token, session) =
            self.new_session(user_id, SignInMethod::Password, &settings, &origin);
        let event = AuditEvent::new(
            Actor::user(user_id),
            "auth.login",
            target("session", session.id),
            origin.ip,
        );
        let checked_hash = candidate.password_hash.as_deref().unwrap_or_default();
        if !self
            .store
            .create_session(session, checked_hash, event)
            .await?
        {
            return Err(AuthError::InvalidCredentials);
        }
        let user = self
            .store
            .user(user_id)
            .await?
            .ok_or(AuthError::InvalidCredentials)?;
        Ok((token, user))
    }

    /// Ends the caller's own session.
    pub async fn logout(&self, caller: &Principal, ip: Option<String>) -> Result<(), AuthError> {
        let session_id = caller
            .session_id()
            .ok_or(AuthError::AuthenticationRequired)?;
        let event = AuditEvent::new(
            caller.actor(),
            "auth.logout",
            target("session", session_id),
            ip,
        );
        self.store
            .end_session(caller.user_id, session_id, self.now(), event)
            .await?;
        Ok(())
    }

    /// The caller's live sessions.
    pub async fn sessions(&self, caller: &Principal) -> Result<Vec<SessionInfo>, AuthError> {
        Ok(self.store.sessions(caller.user_id, self.now()).await?)
    }

    /// Ends one of the caller's sessions; another user's id is unknown.
    pub async fn end_session(
        &self,
        caller: &Principal,
        session_id: Uuid,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let event = AuditEvent::new(
            caller.actor(),
            "session.revoke",
            target("session", session_id),
            ip,
        );
        if self
            .store
            .end_session(caller.user_id, session_id, self.now(), event)
            .await?
        {
            Ok(())
        } else {
            Err(kernel::StoreError::NotFound.into())
        }
    }

    /// Live tokens of one user, or of everyone.
    pub async fn tokens(&self, user_id: Option<Uuid>) -> Result<Vec<TokenInfo>, AuthError> {
        Ok(self.store.tokens(user_id, self.now()).await?)
    }

    /// Issues a token for `owner_id`. `caller` is the owner (self-service) or
    /// an administrator. Refused while the owner's email is unverified
    /// (API.md 17): nothing made before the address is proven outlives a
    /// password reset.
    pub async fn create_token(
        &self,
        caller: &Principal,
        owner_id: Uuid,
        request: TokenRequest,
        ip: Option<String>,
    ) -> Result<IssuedToken, AuthError> {
        let name = short_text(&request.name, "name", TOKEN_NAME_MAX)?;
        if !(1..=MAX_TOKEN_DAYS).contains(&request.lifetime_days) {
            return Err(
                FieldError::new("lifetimeDays", "must be an integer from 1 to 3650").into(),
            );
        }
        let plane = Plane::parse(&request.plane)
            .ok_or_else(|| FieldError::new("plane", "must be API or ADMIN"))?;
        let owner = if owner_id == caller.user_id {
            None
        } else {
            Some(
                self.store
                    .user(owner_id)
                    .await?
                    .ok_or_else(|| FieldError::new("userId", "no such user"))?,
            )
        };
        let owner_verified = match &owner {
            Some(user) => user.email_verified,
            None => {
                self.store
                    .factor_gate(caller.user_id, None)
                    .await?
                    .email_verified
            }
        };
        if !owner_verified {
            return Err(AuthError::EmailNotVerified);
        }
        let (owner_api, owner_admin) = owner
            .as_ref()
            .map_or((caller.api_access, caller.admin), |u| {
                (u.api_access, u.admin)
            });
        match plane {
            Plane::Admin if !owner_admin && owner.is_none() => {
                return Err(AuthError::PermissionDenied(
                    "Only administrators may create Admin API tokens",
                ));
            }
            Plane::Admin if !owner_admin => {
                return Err(FieldError::new(
                    "plane",
                    "ADMIN tokens need an owner in Administrators",
                )
                .into());
            }
            Plane::Api if !owner_api => {
                return Err(
                    FieldError::new("plane", "API tokens need an owner with API access").into(),
                );
            }
            _ => {}
        }
        let now = self.now();
        let (token, prefix) = secret::new_api_token();
        let new = NewToken {
            id: new_id(),
            user_id: owner_id,
            name,
            plane,
            prefix,
            token_hash: secret::hash_secret(&token),
            created_at: now,
            expires_at: now + Duration::days(request.lifetime_days),
            created_by: caller.user_id,
            creator_session: match caller.credential {
                Credential::Session { id } => Some(id),
                _ => None,
            },
        };
        let event = AuditEvent::new(caller.actor(), "token.create", target("token", new.id), ip)
            .with_details(json!({ "userId": owner_id, "plane": plane.as_str(), "name": new.name }));
        let info = self.store.create_token(new, event).await?;
        Ok(IssuedToken { info, token })
    }

    /// Revokes a token; with `owner`, only one of theirs.
    pub async fn revoke_token(
        &self,
        caller: &Principal,
        id: Uuid,
        owner: Option<Uuid>,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let event = AuditEvent::new(caller.actor(), "token.revoke", target("token", id), ip);
        if self
            .store
            .revoke_token(id, owner, self.now(), event)
            .await?
        {
            Ok(())
        } else {
            Err(kernel::StoreError::NotFound.into())
        }
    }
}
