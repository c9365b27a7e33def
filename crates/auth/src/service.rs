use std::sync::Arc;

use audit::{Actor, AuditEvent};
use chrono::{DateTime, Duration, Utc};
use kernel::settings::Settings;
use kernel::validate::{Email, NAME_MAX, NewPassword, TimeZoneName, short_text};
use kernel::{Clock, FieldError, new_id};
use permissions::{Credential, Plane, Principal};
use serde_json::json;
use uuid::Uuid;

use crate::model::*;
use crate::secret;
use crate::{AuthError, AuthStore, HashPool};

/// Longest token lifetime, in days.
pub const MAX_TOKEN_DAYS: i64 = 3650;
/// Longest token label, in characters.
const TOKEN_NAME_MAX: usize = 100;

/// The rules of sign-in, credentials and account administration.
#[derive(Clone)]
pub struct AuthService {
    pub(crate) store: Arc<dyn AuthStore>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Base of links in emails when `auth.email_links_base_url` is not set.
    pub(crate) public_url: String,
    /// Where passwords are hashed and verified, with bounded memory.
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

/// Input of a user creation, before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateUser {
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Initial password.
    pub password: Option<String>,
    /// Roles; `None` gives the `Users` role.
    pub role_ids: Option<Vec<Uuid>>,
    /// Whether the email counts as verified.
    pub email_verified: Option<bool>,
    /// IANA zone.
    pub timezone: Option<String>,
}

/// Input of a user change, before validation. `Some(None)` clears a field.
#[derive(Debug, Clone, Default)]
pub struct ChangeUser {
    /// Display name.
    pub name: Option<Option<String>>,
    /// Sign-in email.
    pub email: Option<String>,
    /// New password.
    pub password: Option<String>,
    /// Replaces the roles.
    pub role_ids: Option<Vec<Uuid>>,
    /// Activates or deactivates.
    pub active: Option<bool>,
    /// Verified flag.
    pub email_verified: Option<bool>,
    /// IANA zone.
    pub timezone: Option<Option<String>>,
}

pub(crate) fn target(kind: &str, id: Uuid) -> Option<String> {
    Some(format!("{kind}:{id}"))
}

fn ttl(hours: f64) -> Duration {
    // Fractional hours are allowed; the settings registry caps the value.
    #[allow(clippy::cast_possible_truncation)]
    Duration::milliseconds((hours * 3_600_000.0).round() as i64)
}

pub(crate) fn optional_name(raw: Option<&str>) -> Result<Option<String>, FieldError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(name) => short_text(name, "name", NAME_MAX).map(Some),
    }
}

fn optional_zone(raw: Option<&str>) -> Result<Option<String>, FieldError> {
    raw.map(|z| TimeZoneName::parse(z, "timezone").map(TimeZoneName::into_inner))
        .transpose()
}

impl AuthService {
    /// A service over `store`, reading time from `clock`; email links start
    /// with `public_url` unless the settings name another base.
    pub fn new(store: Arc<dyn AuthStore>, clock: Arc<dyn Clock>, public_url: &str) -> Self {
        Self {
            store,
            clock,
            public_url: public_url.trim_end_matches('/').to_owned(),
            hasher: HashPool::per_core(),
        }
    }

    /// The pool that hashes passwords (its peak concurrency is observable).
    pub fn hash_pool(&self) -> &HashPool {
        &self.hasher
    }

    /// Checks a new password against the settings and hashes it.
    pub(crate) async fn hash_new_password(
        &self,
        password: &str,
        settings: &Settings,
    ) -> Result<String, AuthError> {
        let password = NewPassword::parse(password, "password", settings.password_min_length())?;
        self.hasher.hash(password.expose().to_owned()).await
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

    /// [`AuthService::authenticate`], also answering the shared state's
    /// versions read in the same round trip and the credential's end.
    pub async fn resolve(&self, bearer: &str) -> Result<Resolved, AuthError> {
        let lookup = CredentialLookup::of(bearer);
        let (versions, record) = self.store.credential(lookup.kind, &lookup.hash).await?;
        let record = record.ok_or(AuthError::AuthenticationRequired)?;
        Ok(Resolved {
            expires_at: record.expires_at,
            principal: self.principal(lookup.kind, record)?,
            versions,
        })
    }

    /// The settings for a flow that resolves no credential (sign-in,
    /// registration, reset, invitation), after heeding every change.
    pub async fn heeded_settings(&self) -> Result<Arc<Settings>, AuthError> {
        self.store.versions().await?;
        Ok(self.store.settings().await?)
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
        let settings = self.heeded_settings().await?;
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

    /// A new session of `user_id` for `origin` (not stored yet) and its token.
    pub fn new_session(
        &self,
        user_id: Uuid,
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
        };
        (token, session)
    }

    /// Signs in with email and password. Every failure but an unverified
    /// email answers the same, after the same argon2 work.
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.heeded_settings().await?;
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
        let (token, session) = self.new_session(user_id, &settings, &origin);
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

    /// One user.
    pub async fn user(&self, id: Uuid) -> Result<User, AuthError> {
        Ok(self
            .store
            .user(id)
            .await?
            .ok_or(kernel::StoreError::NotFound)?)
    }

    /// Changes the caller's own name and time zone.
    pub async fn update_me(
        &self,
        caller: &Principal,
        name: Option<Option<String>>,
        timezone: Option<Option<String>>,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let changes = UserChanges {
            name: name.map(|n| optional_name(n.as_deref())).transpose()?,
            timezone: timezone.map(|z| optional_zone(z.as_deref())).transpose()?,
            ..UserChanges::default()
        };
        let event = AuditEvent::new(
            caller.actor(),
            "user.update",
            target("user", caller.user_id),
            ip,
        )
        .with_details(json!({ "self": true }));
        Ok(self
            .store
            .update_user(
                caller.user_id,
                changes,
                caller.session_id(),
                self.now(),
                event,
            )
            .await?)
    }

    /// Live tokens of one user, or of everyone.
    pub async fn tokens(&self, user_id: Option<Uuid>) -> Result<Vec<TokenInfo>, AuthError> {
        Ok(self.store.tokens(user_id, self.now()).await?)
    }

    /// Issues a token for `owner_id`. `caller` is the owner (self-service) or an administrator.
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

    /// A page of users.
    pub async fn users(
        &self,
        search: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<UserPage, AuthError> {
        let search = search.map(str::trim).filter(|s| !s.is_empty());
        if search.is_some_and(|s| s.chars().count() > NAME_MAX) {
            return Err(FieldError::new("search", "is too long").into());
        }
        Ok(self.store.users(search, limit, offset).await?)
    }

    /// The members of a role.
    pub async fn role_members(&self, role_id: Uuid) -> Result<Vec<User>, AuthError> {
        Ok(self
            .store
            .role_members(role_id)
            .await?
            .ok_or(kernel::StoreError::NotFound)?)
    }

    /// Validates the input of a new user and hashes its password.
    pub(crate) async fn new_user(
        &self,
        input: CreateUser,
        settings: &Settings,
    ) -> Result<NewUser, AuthError> {
        let email = Email::parse(&input.email, "email")?;
        let name = optional_name(input.name.as_deref())?;
        let timezone = optional_zone(input.timezone.as_deref())?;
        let password_hash = match input.password {
            Some(p) => Some(self.hash_new_password(&p, settings).await?),
            None => None,
        };
        Ok(NewUser {
            id: new_id(),
            email,
            name,
            password_hash,
            role_ids: input
                .role_ids
                .unwrap_or_else(|| vec![kernel::USERS_ROLE_ID]),
            email_verified: input.email_verified.unwrap_or(false),
            timezone,
            created_at: self.now(),
        })
    }

    /// Creates a user (administrators, the command line, bootstrap).
    pub async fn create_user(
        &self,
        actor: Actor,
        input: CreateUser,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let settings = self.store.settings().await?;
        let user = self.new_user(input, &settings).await?;
        let event = AuditEvent::new(actor, "user.create", target("user", user.id), ip)
            .with_details(json!({ "email": user.email.as_str(), "roleIds": user.role_ids }));
        Ok(self.store.create_user(user, None, event).await?)
    }

    /// Changes a user. A new password ends all the user's sessions except the caller's own.
    pub async fn update_user(
        &self,
        caller: Option<&Principal>,
        id: Uuid,
        input: ChangeUser,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let settings = self.store.settings().await?;
        let password_hash = match input.password {
            Some(p) => Some(self.hash_new_password(&p, &settings).await?),
            None => None,
        };
        let mut changed: Vec<&str> = Vec::new();
        let flags = [
            ("name", input.name.is_some()),
            ("email", input.email.is_some()),
            ("password", password_hash.is_some()),
            ("roleIds", input.role_ids.is_some()),
            ("active", input.active.is_some()),
            ("emailVerified", input.email_verified.is_some()),
            ("timezone", input.timezone.is_some()),
        ];
        changed.extend(flags.iter().filter(|(_, set)| *set).map(|(name, _)| *name));
        let changes = UserChanges {
            name: input
                .name
                .map(|n| optional_name(n.as_deref()))
                .transpose()?,
            email: input.email.map(|e| Email::parse(&e, "email")).transpose()?,
            password_hash,
            role_ids: input.role_ids,
            active: input.active,
            email_verified: input.email_verified,
            timezone: input
                .timezone
                .map(|z| optional_zone(z.as_deref()))
                .transpose()?,
        };
        let actor = caller.map_or(Actor::SYSTEM, Principal::actor);
        let event = AuditEvent::new(actor, "user.update", target("user", id), ip)
            .with_details(json!({ "fields": changed }));
        let keep = caller
            .filter(|c| c.user_id == id)
            .and_then(Principal::session_id);
        Ok(self
            .store
            .update_user(id, changes, keep, self.now(), event)
            .await?)
    }

    /// Deletes a user.
    pub async fn delete_user(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let event = AuditEvent::new(caller.actor(), "user.delete", target("user", id), ip);
        Ok(self.store.delete_user(id, event).await?)
    }

    /// Creates an administrator, or resets the password of the account with
    /// that email and makes it a verified, active administrator.
    pub async fn ensure_admin(
        &self,
        email: &str,
        password: &str,
        name: Option<String>,
    ) -> Result<User, AuthError> {
        let email = Email::parse(email, "email")?;
        match self.store.user_by_email(email.as_str()).await? {
            None => {
                let input = CreateUser {
                    email: email.as_str().to_owned(),
                    name,
                    password: Some(password.to_owned()),
                    role_ids: Some(vec![kernel::ADMINISTRATORS_ROLE_ID]),
                    email_verified: Some(true),
                    timezone: None,
                };
                self.create_user(Actor::SYSTEM, input, None).await
            }
            Some(existing) => {
                let mut roles: Vec<Uuid> = existing.roles.iter().map(|r| r.id).collect();
                if !roles.contains(&kernel::ADMINISTRATORS_ROLE_ID) {
                    roles.push(kernel::ADMINISTRATORS_ROLE_ID);
                }
                let input = ChangeUser {
                    name: name.map(Some),
                    password: Some(password.to_owned()),
                    role_ids: Some(roles),
                    active: Some(true),
                    email_verified: Some(true),
                    ..ChangeUser::default()
                };
                self.update_user(None, existing.id, input, None).await
            }
        }
    }
}
