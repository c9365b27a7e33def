//! The account lifecycle: registration, password reset and change, email
//! verification and invitations. Links travel by email through the outbox,
//! written in the same transaction as the token they carry. The users'
//! administration is in `users`.

use std::sync::Arc;

use audit::{Actor, AuditEvent};
use chrono::{DateTime, Utc};
use kernel::settings::Settings;
use kernel::validate::{Email, NewPassword};
use kernel::{Clock, FieldError, StoreError, new_id};
use permissions::Principal;
use serde_json::json;
use settings::SettingsService;
use uuid::Uuid;

use crate::email::{self, EmailKind};
use crate::model::{Invitation, NewOneTimeToken, TokenMail, User, target};
use crate::secret;
use crate::users::optional_name;
use crate::{AuthError, AuthStore, CreateUser, HashPool};

/// Longest one-time token accepted before lookup.
const TOKEN_MAX: usize = 256;

/// Input of an invitation, before validation.
#[derive(Debug, Clone)]
pub struct InviteRequest {
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
}

fn token_hash(token: &str) -> Result<[u8; 32], AuthError> {
    let token = token.trim();
    if token.is_empty() || token.len() > TOKEN_MAX {
        return Err(AuthError::InvalidToken);
    }
    Ok(secret::hash_secret(token))
}

/// Accounts: their lifecycle (registration, passwords, verification,
/// invitations) and their administration.
#[derive(Clone)]
pub struct AccountService {
    pub(crate) store: Arc<dyn AuthStore>,
    pub(crate) settings: SettingsService,
    pub(crate) clock: Arc<dyn Clock>,
    /// Base of links in emails when `auth.email_links_base_url` is not set.
    public_url: String,
    /// Where passwords are hashed and verified, with bounded memory.
    hasher: HashPool,
}

impl AccountService {
    /// A service over `store`, reading time from `clock`; passwords are
    /// hashed on `hasher` (shared with the sign-in service); email links
    /// start with `public_url` unless the settings name another base.
    pub fn new(
        store: Arc<dyn AuthStore>,
        settings: SettingsService,
        clock: Arc<dyn Clock>,
        hasher: HashPool,
        public_url: &str,
    ) -> Self {
        Self {
            store,
            settings,
            clock,
            public_url: public_url.trim_end_matches('/').to_owned(),
            hasher,
        }
    }

    /// The time of the service's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
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

    /// The hash of `token` once the store holds it live as a `kind` token:
    /// a bogus token is refused before any password is hashed, so a flood
    /// of them cannot fill the hashing queue.
    async fn live_token(&self, token: &str, kind: EmailKind) -> Result<[u8; 32], AuthError> {
        let hash = token_hash(token)?;
        if self
            .store
            .token_live(&hash, kind.as_str(), self.now())
            .await?
        {
            Ok(hash)
        } else {
            Err(AuthError::InvalidToken)
        }
    }

    /// Where email links point: the settings' base, else `<public url>/admin/auth`.
    fn links_base(&self, settings: &Settings) -> String {
        settings
            .value("auth.email_links_base_url")
            .as_str()
            .map_or_else(|| format!("{}/admin/auth", self.public_url), str::to_owned)
    }

    /// A fresh one-time token of `kind` and the email that carries its link.
    fn token_mail(
        &self,
        settings: &Settings,
        kind: EmailKind,
        to: &str,
        name: Option<&str>,
        user_id: Option<Uuid>,
        invitation_id: Option<Uuid>,
    ) -> TokenMail {
        let token = secret::new_session_token();
        let now = self.now();
        let link = email::link(&self.links_base(settings), kind, &token);
        TokenMail {
            token: NewOneTimeToken {
                id: new_id(),
                kind,
                token_hash: secret::hash_secret(&token),
                user_id,
                invitation_id,
                code_hash: None,
                created_at: now,
                expires_at: now + kind.lifetime(),
            },
            email: email::compose(kind, to, name, link),
        }
    }

    /// Self-registration, when `auth.registration_enabled` is on. With
    /// verification required, the verification email is queued with the account.
    pub async fn register(
        &self,
        email: &str,
        password: &str,
        name: Option<String>,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let settings = self.settings.heeded().await?;
        if !settings.registration_enabled() {
            return Err(AuthError::PermissionDenied("Registration is closed"));
        }
        let role = settings.registration_role();
        let input = CreateUser {
            email: email.to_owned(),
            name,
            password: Some(password.to_owned()),
            role_ids: Some(vec![role]),
            email_verified: Some(false),
            timezone: None,
        };
        let user = self.new_user(input, &settings).await?;
        let mail = settings.email_verification_required().then(|| {
            self.token_mail(
                &settings,
                EmailKind::EmailVerification,
                user.email.as_str(),
                user.name.as_deref(),
                Some(user.id),
                None,
            )
        });
        let event = AuditEvent::new(
            Actor::user(user.id),
            "auth.register",
            target("user", user.id),
            ip,
        )
        .with_details(json!({ "email": user.email.as_str() }));
        Ok(self.store.create_user(user, mail, event).await?)
    }

    /// Queues a reset email when the address belongs to an active account
    /// with API access; does nothing otherwise. Runs in the background so
    /// that the answer takes the same time either way.
    pub fn request_password_reset(&self, email: String, ip: Option<String>) {
        let service = self.clone();
        tokio::spawn(async move {
            after_the_answer().await;
            if let Err(error) = service.send_reset(&email, ip).await {
                tracing::error!(?error, "queuing a password reset failed");
            }
        });
    }

    async fn send_reset(&self, email: &str, ip: Option<String>) -> Result<(), AuthError> {
        let Ok(email) = Email::parse(email, "email") else {
            return Ok(());
        };
        let Some(user) = self.store.user_by_email(email.as_str()).await? else {
            return Ok(());
        };
        if !user.active {
            return Ok(());
        }
        self.mail_user(
            &user,
            EmailKind::PasswordReset,
            "auth.password_reset_requested",
            ip,
        )
        .await
    }

    /// Queues a fresh link of `kind` to `user`, audited as `action`.
    pub(crate) async fn mail_user(
        &self,
        user: &User,
        kind: EmailKind,
        action: &'static str,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let settings = self.settings.heeded().await?;
        let mut mail = self.token_mail(
            &settings,
            kind,
            &user.email,
            user.name.as_deref(),
            Some(user.id),
            None,
        );
        if kind == EmailKind::SignInCode {
            let code = crate::email_code::new_email_code();
            mail.token.code_hash = Some(crate::email_code::email_code_hash(
                &mail.token.token_hash,
                &code,
            ));
            mail.email.code = Some(code);
        }
        let event = AuditEvent::new(
            Actor::user(user.id),
            action,
            target("user", user.id),
            ip.clone(),
        );
        let per_hour = settings.emails_per_address_per_hour();
        let dropped = AuditEvent::new(
            Actor::user(user.id),
            "auth.email_dropped",
            target("user", user.id),
            ip,
        )
        .with_details(json!({ "kind": kind.as_str(), "perHour": per_hour }));
        self.store
            .issue_capped_mail(mail, event, dropped, per_hour)
            .await?;
        Ok(())
    }

    /// Sets a new password with a reset token; ends every session of the user.
    pub async fn reset_password(
        &self,
        token: &str,
        password: &str,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        self.redeem_with_password(token, password, EmailKind::PasswordReset, ip)
            .await
    }

    /// Uses a one-time token of `kind` that sets a password (a reset or an
    /// invitation): the token is found live before the password is hashed,
    /// then redeemed with the hash in one transaction with its audit entry.
    async fn redeem_with_password(
        &self,
        token: &str,
        password: &str,
        kind: EmailKind,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let hash = self.live_token(token, kind).await?;
        let settings = self.settings.heeded().await?;
        let password_hash = self.hash_new_password(password, &settings).await?;
        let now = self.now();
        let redeemed = match kind {
            EmailKind::Invitation => {
                let event =
                    AuditEvent::new(Actor::UNKNOWN_USER, "auth.invitation_accepted", None, ip);
                self.store
                    .redeem_invitation(&hash, password_hash, now, event)
                    .await?
            }
            EmailKind::PasswordReset => {
                let event = AuditEvent::new(Actor::UNKNOWN_USER, "auth.password_reset", None, ip);
                self.store
                    .redeem_reset(&hash, password_hash, now, event)
                    .await?
            }
            EmailKind::EmailVerification | EmailKind::SignInCode => {
                return Err(AuthError::InvalidToken);
            }
        };
        redeemed.map(drop).ok_or(AuthError::InvalidToken)
    }

    /// Changes the caller's password; their other sessions end.
    pub async fn change_password(
        &self,
        caller: &Principal,
        current: &str,
        new: &str,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let stored = self
            .store
            .password_hash(caller.user_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        let Some(stored) = stored else {
            return Err(AuthError::PermissionDenied(
                "This account has no password yet",
            ));
        };
        let settings = self.settings.current().await?;
        let new = NewPassword::parse(new, "newPassword", settings.password_min_length())?;
        if !self.hasher.verify(current.to_owned(), Some(stored)).await? {
            return Err(AuthError::InvalidCurrentPassword);
        }
        let changes = crate::UserChanges {
            password_hash: Some(self.hasher.hash(new.expose().to_owned()).await?),
            ..crate::UserChanges::default()
        };
        let event = AuditEvent::new(
            caller.actor(),
            "auth.password_change",
            target("user", caller.user_id),
            ip,
        );
        self.store
            .update_user(
                caller.user_id,
                changes,
                caller.session_id(),
                self.now(),
                event,
            )
            .await?;
        Ok(())
    }

    /// Marks an email verified with a verification token.
    pub async fn verify_email(&self, token: &str, ip: Option<String>) -> Result<(), AuthError> {
        let hash = token_hash(token)?;
        let event = AuditEvent::new(Actor::UNKNOWN_USER, "auth.email_verified", None, ip);
        self.store
            .redeem_verification(&hash, self.now(), event)
            .await?
            .map(|_| ())
            .ok_or(AuthError::InvalidToken)
    }

    /// Queues a new verification email for the caller (with a session) or
    /// for the account behind `email`; silently nothing when there is none
    /// or it is verified already. Runs in the background.
    pub fn resend_verification(
        &self,
        caller: Option<Uuid>,
        email: Option<String>,
        ip: Option<String>,
    ) {
        let service = self.clone();
        tokio::spawn(async move {
            after_the_answer().await;
            if let Err(error) = service.send_verification(caller, email, ip).await {
                tracing::error!(?error, "queuing a verification email failed");
            }
        });
    }

    async fn send_verification(
        &self,
        caller: Option<Uuid>,
        email: Option<String>,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let user_id = match (caller, email) {
            (Some(id), _) => id,
            (None, Some(email)) => {
                let Ok(email) = Email::parse(&email, "email") else {
                    return Ok(());
                };
                match self.store.user_by_email(email.as_str()).await? {
                    Some(user) => user.id,
                    None => return Ok(()),
                }
            }
            (None, None) => return Ok(()),
        };
        let user = self.user(user_id).await?;
        if user.email_verified || !user.active {
            return Ok(());
        }
        self.mail_user(
            &user,
            EmailKind::EmailVerification,
            "auth.verification_requested",
            ip,
        )
        .await
    }

    /// Accepts an invitation: creates the verified account with its password
    /// and roles. Signs nobody in.
    pub async fn accept_invitation(
        &self,
        token: &str,
        password: &str,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        self.redeem_with_password(token, password, EmailKind::Invitation, ip)
            .await
    }

    /// Pending invitations.
    pub async fn invitations(&self) -> Result<Vec<Invitation>, AuthError> {
        Ok(self.store.invitations(self.now()).await?)
    }

    /// Invites someone by email; the invitation email is queued with it.
    pub async fn invite(
        &self,
        caller: &Principal,
        request: InviteRequest,
        ip: Option<String>,
    ) -> Result<Invitation, AuthError> {
        let email = Email::parse(&request.email, "email")?;
        let name = optional_name(request.name.as_deref())?;
        if request.role_ids.len() > 100 {
            return Err(FieldError::new("roleIds", "has too many roles").into());
        }
        let settings = self.settings.current().await?;
        let now = self.now();
        let invitation = Invitation {
            id: new_id(),
            email: email.as_str().to_owned(),
            name,
            role_ids: request.role_ids,
            invited_by: Some(caller.user_id),
            created_at: now,
            expires_at: now + EmailKind::Invitation.lifetime(),
        };
        let mail = self.token_mail(
            &settings,
            EmailKind::Invitation,
            &invitation.email,
            invitation.name.as_deref(),
            None,
            Some(invitation.id),
        );
        let event = AuditEvent::new(
            caller.actor(),
            "invitation.create",
            target("invitation", invitation.id),
            ip,
        )
        .with_details(json!({ "email": invitation.email, "roleIds": invitation.role_ids }));
        Ok(self
            .store
            .create_invitation(invitation, mail, event)
            .await?)
    }

    /// Withdraws a pending invitation; its link stops working.
    pub async fn revoke_invitation(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let event = AuditEvent::new(
            caller.actor(),
            "invitation.delete",
            target("invitation", id),
            ip,
        );
        if self.store.delete_invitation(id, event).await? {
            Ok(())
        } else {
            Err(StoreError::NotFound.into())
        }
    }
}

/// Background work that differs for known and unknown emails waits until
/// the uniform answer has gone out, so it cannot slow that answer down (on
/// a busy machine a known email's work started at once did, measurably).
pub(crate) async fn after_the_answer() {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
}
