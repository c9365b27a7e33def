//! The provider sign-in flow (API.md section 3a): start, callback, account
//! matching, and the administration of linked identities.

use std::sync::Arc;

use audit::{Actor, AuditEvent, AuditStore};
use auth::secret::{hash_secret, new_session_token};
use auth::{NewUser, Origin, SignInService};
use chrono::Duration;
use kernel::settings::Settings;
use kernel::validate::{Email, NAME_MAX};
use kernel::{Clock, Code, FieldError, StoreError, new_id};
use permissions::Principal;
use serde_json::{Value, json};
use settings::SettingsService;
use url::Url;
use uuid::Uuid;

use crate::error::OAuthError;
use crate::protocol::{FlowSecrets, Protocol, ProviderIdentity};
use crate::provider::{Provider, ProviderConfig};
use crate::redirect::AllowedOrigins;
use crate::store::{Identity, OAuthStore, PendingFlow, SignInPlan};

/// How long a started flow may take to come back.
const FLOW_MINUTES: i64 = 10;
/// Longest `state` looked up (ours are 43 characters).
const STATE_MAX: usize = 128;

/// What the provider sent back to the callback.
#[derive(Debug, Clone, Default)]
pub struct Callback {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the flow was started with.
    pub state: Option<String>,
    /// The provider's error, when the person refused or it failed.
    pub error: Option<String>,
}

/// A refused sign-in: the code the browser gets in the fragment and the
/// reason the audit log keeps.
struct Refusal {
    code: Code,
    reason: &'static str,
}

impl Refusal {
    fn failed(reason: &'static str) -> Self {
        Self {
            code: Code::OauthFailed,
            reason,
        }
    }

    fn denied(reason: &'static str) -> Self {
        Self {
            code: Code::PermissionDenied,
            reason,
        }
    }
}

/// Sign-in with Google, GitHub or an OIDC issuer.
#[derive(Clone)]
pub struct OAuthService {
    auth: SignInService,
    settings: SettingsService,
    store: Arc<dyn OAuthStore>,
    audit: Arc<dyn AuditStore>,
    protocol: Arc<Protocol>,
    public_url: String,
}

impl OAuthService {
    /// A service over its stores; `public_url` gives the callback URL the
    /// providers are told to return to. Fails when no TLS client can be built.
    pub fn new(
        auth: SignInService,
        settings: SettingsService,
        store: Arc<dyn OAuthStore>,
        audit: Arc<dyn AuditStore>,
        clock: Arc<dyn Clock>,
        public_url: &str,
    ) -> Result<Self, reqwest::Error> {
        Ok(Self {
            auth,
            settings,
            store,
            audit,
            protocol: Arc::new(Protocol::new(clock)?),
            public_url: public_url.trim_end_matches('/').to_owned(),
        })
    }

    /// The providers one can sign in with now.
    pub async fn enabled(&self) -> Result<Vec<Provider>, OAuthError> {
        let settings = self.settings.heeded().await?;
        Ok(Provider::ALL
            .into_iter()
            .filter(|p| ProviderConfig::of(&settings, *p).is_some())
            .collect())
    }

    /// The URL to register with a provider, where it sends the browser back.
    pub fn callback_url(&self, provider: Provider) -> String {
        format!(
            "{}/api/auth/oauth/{}/callback",
            self.public_url,
            provider.as_str()
        )
    }

    /// The origins a flow may return to: the public URL's, the email links'
    /// and `auth.redirect_allow_list`.
    fn allowed_origins(&self, settings: &Settings) -> AllowedOrigins {
        let links = settings.value("auth.email_links_base_url").as_str();
        let listed = settings
            .value("auth.redirect_allow_list")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        AllowedOrigins::of(
            std::iter::once(self.public_url.as_str())
                .chain(links)
                .chain(listed),
        )
    }

    /// Starts a flow: checks `redirect_to`, stores the single-use state with
    /// the PKCE verifier and nonce, and answers the provider's authorize URL
    /// (or, when the provider cannot be reached, `redirect_to` with the error).
    pub async fn start(
        &self,
        provider: &str,
        redirect_to: Option<&str>,
        origin: &Origin,
    ) -> Result<Url, OAuthError> {
        let settings = self.settings.heeded().await?;
        let provider = Provider::parse(provider).ok_or(OAuthError::NotFound)?;
        let config = ProviderConfig::of(&settings, provider).ok_or(OAuthError::NotFound)?;
        let raw = redirect_to.ok_or_else(|| FieldError::new("redirect_to", "is required"))?;
        let mut back = self.allowed_origins(&settings).check(raw)?;
        self.auth.take_sign_in_attempt(&settings, origin).await?;
        let state = new_session_token();
        let pkce_verifier = new_session_token();
        let nonce = (provider == Provider::Oidc).then(new_session_token);
        let secrets = FlowSecrets {
            state: &state,
            pkce_verifier: &pkce_verifier,
            nonce: nonce.as_deref(),
        };
        let redirect_uri = self.callback_url(provider);
        let url = match self
            .protocol
            .authorize_url(provider, &config, &redirect_uri, &secrets)
            .await
        {
            Ok(url) => url,
            Err(failure) => {
                tracing::warn!(provider = provider.as_str(), reason = failure.reason, detail = %failure.detail, "provider sign-in could not start");
                let refusal = Refusal::failed(failure.reason);
                self.refused(provider, &refusal, None, origin).await?;
                back.set_fragment(Some(&format!("error={}", refusal.code.as_str())));
                return Ok(back);
            }
        };
        let now = self.auth.now();
        let flow = PendingFlow {
            state_hash: hash_secret(&state),
            provider: provider.as_str().to_owned(),
            redirect_to: back.into(),
            pkce_verifier,
            nonce,
            expires_at: now + Duration::minutes(FLOW_MINUTES),
        };
        self.store.save_flow(flow, now).await?;
        Ok(url)
    }

    /// Finishes a flow: uses its state up, reads the identity, matches the
    /// account, and answers `redirect_to` with `#token=` or `#error=`. A state
    /// that is not known, live and this provider's is refused unredirected.
    pub async fn finish(
        &self,
        provider: &str,
        callback: Callback,
        origin: &Origin,
    ) -> Result<Url, OAuthError> {
        let provider = Provider::parse(provider).ok_or(OAuthError::NotFound)?;
        let state = callback
            .state
            .clone()
            .filter(|s| !s.is_empty() && s.len() <= STATE_MAX)
            .ok_or(OAuthError::InvalidState)?;
        let flow = self
            .store
            .take_flow(&hash_secret(&state))
            .await?
            .filter(|f| f.provider == provider.as_str() && f.expires_at > self.auth.now())
            .ok_or(OAuthError::InvalidState)?;
        let mut back = Url::parse(&flow.redirect_to).map_err(|_| OAuthError::InvalidState)?;
        let fragment = match self
            .complete(provider, &state, &flow, callback, origin)
            .await?
        {
            Ok(Landing::Session(token)) => format!("token={token}"),
            Ok(Landing::Challenge(challenge)) => format!("mfa={challenge}"),
            Err((refusal, email)) => {
                self.refused(provider, &refusal, email.as_deref(), origin)
                    .await?;
                format!("error={}", refusal.code.as_str())
            }
        };
        back.set_fragment(Some(&fragment));
        Ok(back)
    }

    /// The identity, the account and the new session; a refusal carries the
    /// email the provider gave, for the audit log.
    async fn complete(
        &self,
        provider: Provider,
        state: &str,
        flow: &PendingFlow,
        callback: Callback,
        origin: &Origin,
    ) -> Result<Result<Landing, (Refusal, Option<String>)>, OAuthError> {
        let settings = self.settings.heeded().await?;
        let Some(config) = ProviderConfig::of(&settings, provider) else {
            return Ok(Err((Refusal::failed("provider_disabled"), None)));
        };
        let (Some(code), None) = (callback.code, callback.error) else {
            return Ok(Err((Refusal::failed("provider_refused"), None)));
        };
        let secrets = FlowSecrets {
            state,
            pkce_verifier: &flow.pkce_verifier,
            nonce: flow.nonce.as_deref(),
        };
        let redirect_uri = self.callback_url(provider);
        let identity = match self
            .protocol
            .identity(provider, &config, &redirect_uri, &code, &secrets)
            .await
        {
            Ok(identity) => identity,
            Err(failure) => {
                tracing::warn!(provider = provider.as_str(), reason = failure.reason, detail = %failure.detail, "provider sign-in failed");
                return Ok(Err((Refusal::failed(failure.reason), None)));
            }
        };
        let email = identity.email.clone();
        Ok(self
            .sign_in(provider, identity, config.trust_email, &settings, origin)
            .await?
            .map_err(|refusal| (refusal, email)))
    }

    /// Matches the account (API.md 3a) and stores the session, or, for an
    /// account with a second factor, starts its challenge. An email the
    /// provider says nothing of counts as verified when `trust_email`.
    async fn sign_in(
        &self,
        provider: Provider,
        identity: ProviderIdentity,
        trust_email: bool,
        settings: &Settings,
        origin: &Origin,
    ) -> Result<Result<Landing, Refusal>, OAuthError> {
        let verified = identity.email_verified.unwrap_or(trust_email);
        let email = match (&identity.email, verified) {
            (Some(email), true) => Email::parse(email, "email").ok(),
            _ => None,
        };
        let Some(email) = email else {
            return Ok(Err(Refusal::failed("email_not_verified")));
        };
        let found = self
            .store
            .account_for(provider.as_str(), &identity.subject, Some(email.as_str()))
            .await?;
        let now = self.auth.now();
        let email_text = email.as_str().to_owned();
        let linked = |user_id: Uuid| Identity {
            id: new_id(),
            user_id,
            provider: provider.as_str().to_owned(),
            subject: identity.subject.clone(),
            email: Some(email_text.clone()),
            created_at: now,
            last_used_at: now,
        };
        let details = if identity.email_verified.is_none() {
            json!({ "provider": provider.as_str(), "emailTrusted": true })
        } else {
            json!({ "provider": provider.as_str() })
        };
        let ip = origin.ip.clone();
        let second_step = found.as_ref().is_some_and(|account| {
            auth::needs_second_step(settings, account.totp, account.passkey, account.admin)
        });
        let (user_id, plan, change) = match found {
            Some(account) if !account.active => return Ok(Err(Refusal::failed("inactive"))),
            Some(account) if !account.api_access => {
                return Ok(Err(Refusal::denied("no_api_access")));
            }
            Some(account) => match account.identity_id {
                Some(identity_id) => (
                    account.user_id,
                    SignInPlan::Returning {
                        identity_id,
                        email: Some(email_text.clone()),
                    },
                    None,
                ),
                None => {
                    let identity = linked(account.user_id);
                    let event = AuditEvent::new(
                        Actor::user(account.user_id),
                        "auth.identity_link",
                        Some(format!("identity:{}", identity.id)),
                        ip.clone(),
                    );
                    (account.user_id, SignInPlan::Link(identity), Some(event))
                }
            },
            None if !settings.registration_enabled() => {
                return Ok(Err(Refusal::denied("registration_off")));
            }
            None => {
                let role = settings.registration_role();
                if !self.store.role_api_access(role).await? {
                    return Ok(Err(Refusal::denied("no_api_access")));
                }
                let user = NewUser {
                    id: new_id(),
                    email,
                    name: identity
                        .name
                        .as_deref()
                        .map(|n| n.trim().chars().take(NAME_MAX).collect::<String>())
                        .filter(|n| !n.is_empty()),
                    password_hash: None,
                    role_ids: vec![role],
                    email_verified: true,
                    timezone: None,
                    created_at: now,
                };
                let user_id = user.id;
                let event = AuditEvent::new(
                    Actor::user(user_id),
                    "auth.register",
                    Some(format!("user:{user_id}")),
                    ip.clone(),
                );
                (
                    user_id,
                    SignInPlan::Register(user, linked(user_id)),
                    Some(event),
                )
            }
        };
        let (token, session) =
            self.auth
                .new_session(user_id, auth::SignInMethod::Provider, settings, origin);
        let login = AuditEvent::new(
            Actor::user(user_id),
            "auth.login",
            Some(format!("session:{}", session.id)),
            ip,
        );
        // With TOTP on, no session yet: the challenge makes it.
        let (session, login) = if second_step {
            (None, None)
        } else {
            (Some(session), Some(login))
        };
        let events = change
            .into_iter()
            .chain(login)
            .map(|e| e.with_details(details.clone()))
            .collect();
        match self.store.sign_in(plan, session, events).await {
            Ok(()) if second_step => Ok(Ok(Landing::Challenge(
                self.auth
                    .mfa_challenge(user_id, auth::SignInMethod::Provider, None, origin)
                    .await?,
            ))),
            Ok(()) => Ok(Ok(Landing::Session(token))),
            // The same identity or email registered by a simultaneous callback.
            Err(StoreError::Conflict { .. }) => Ok(Err(Refusal::failed("conflict"))),
            Err(e) => Err(e.into()),
        }
    }

    /// Audits a refused provider sign-in.
    async fn refused(
        &self,
        provider: Provider,
        refusal: &Refusal,
        email: Option<&str>,
        origin: &Origin,
    ) -> Result<(), OAuthError> {
        let event = AuditEvent::new(
            Actor::UNKNOWN_USER,
            "auth.login_failed",
            None,
            origin.ip.clone(),
        )
        .with_details(json!({
            "provider": provider.as_str(),
            "reason": refusal.reason,
            "email": email,
        }));
        self.audit.record(event).await?;
        Ok(())
    }

    /// The identities linked to a user.
    pub async fn identities(&self, user_id: Uuid) -> Result<Vec<Identity>, OAuthError> {
        self.store
            .identities(user_id)
            .await?
            .ok_or(OAuthError::NotFound)
    }

    /// Unlinks an identity from a user (administrators).
    pub async fn unlink(
        &self,
        caller: &Principal,
        user_id: Uuid,
        identity_id: Uuid,
        ip: Option<String>,
    ) -> Result<(), OAuthError> {
        let event = AuditEvent::new(
            caller.actor(),
            "identity.delete",
            Some(format!("identity:{identity_id}")),
            ip,
        )
        .with_details(json!({ "userId": user_id }));
        if self
            .store
            .delete_identity(user_id, identity_id, event)
            .await?
        {
            Ok(())
        } else {
            Err(OAuthError::NotFound)
        }
    }
}

/// Where a provider's sign-in lands.
enum Landing {
    /// A session, by its token.
    Session(String),
    /// A second-factor challenge, by its secret.
    Challenge(String),
}
