//! Passkeys (API.md 14): WebAuthn discoverable credentials with user
//! verification, registered by a signed-in person and signing in on their
//! own (a passkey is itself two factors). The ceremonies' states wait in
//! PostgreSQL, so a ceremony started on one instance finishes on another;
//! each is single-use and lasts 5 minutes.

use audit::{Actor, AuditEvent};
use chrono::Duration;
use kernel::validate::short_text;
use kernel::{StoreError, new_id, settings::Settings};
use permissions::Principal;
use serde_json::{Value, json};
use url::Url;
use uuid::Uuid;
use webauthn_rs::prelude::{
    DiscoverableAuthentication, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, Webauthn, WebauthnBuilder,
};

use crate::model::*;
use crate::{AuthError, SignInService, secret};

/// Lifetime of a ceremony, in the options and in the store.
const CEREMONY_MINUTES: i64 = 5;
/// Sign-in ceremonies in flight, at most (each lives 5 minutes; past it
/// a start answers 503 with `Retry-After`).
const MAX_CEREMONIES: u32 = 10_000;
/// Passkeys one account may hold.
const MAX_PASSKEYS: u32 = 20;
/// Longest passkey label.
const NAME_MAX: usize = 100;
/// The relying party's name shown by authenticators.
const RP_NAME: &str = "Tessera";

/// A ceremony started: its id, and the options to hand to
/// `navigator.credentials.create` or `.get` (`publicKey`, binary fields
/// base64url).
#[derive(Debug, Clone)]
pub struct CeremonyStart {
    /// The id that finishes it.
    pub challenge_id: String,
    /// The `publicKey` options.
    pub options: Value,
}

/// Passkey registration, sign-in and management.
#[derive(Clone)]
pub struct PasskeyService {
    sign_in: SignInService,
    /// The public URL: its host is the default relying party id, its
    /// origin the default accepted origin.
    public_url: String,
}

impl PasskeyService {
    /// A service over the sign-in service's store, settings and clock.
    pub fn new(sign_in: SignInService, public_url: &str) -> Self {
        Self {
            sign_in,
            public_url: public_url.to_owned(),
        }
    }

    /// Whether passkeys can be used with the current settings (the
    /// relying party id and origins fit together).
    pub async fn available(&self) -> Result<bool, AuthError> {
        let settings = self.sign_in.settings.heeded().await?;
        Ok(self.relying_party(&settings).is_ok())
    }

    /// The relying party of `settings`: `auth.passkey_rp_id` (else the
    /// public URL's host) and `auth.passkey_origins` (else the public URL's
    /// origin), each origin on that domain or under it.
    fn relying_party(&self, settings: &Settings) -> Result<Webauthn, AuthError> {
        let unusable = || {
            AuthError::Store(StoreError::Conflict {
                field: None,
                message: "Passkeys need a relying party: set auth.passkey_rp_id to the domain \
                          name people reach this service by, and auth.passkey_origins to the \
                          origins of its pages (a service reached by IP address cannot use passkeys)"
                    .into(),
            })
        };
        let public = Url::parse(&self.public_url).map_err(|_| unusable())?;
        let rp_id = match settings.passkey_rp_id() {
            Some(id) => id.to_owned(),
            None => public.domain().ok_or_else(unusable)?.to_owned(),
        };
        let mut origins: Vec<Url> = settings
            .passkey_origins()
            .map(Url::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| unusable())?;
        if origins.is_empty() {
            origins.push(public);
        }
        let fits = |origin: &Url| {
            origin
                .domain()
                .is_some_and(|d| d == rp_id || d.ends_with(&format!(".{rp_id}")))
        };
        if !origins.iter().all(fits) {
            return Err(unusable());
        }
        let mut builder = WebauthnBuilder::new(&rp_id, &origins[0])
            .map_err(|_| unusable())?
            .rp_name(RP_NAME)
            .timeout(std::time::Duration::from_secs(60 * CEREMONY_MINUTES as u64));
        for origin in &origins[1..] {
            builder = builder.append_allowed_origin(origin);
        }
        builder.build().map_err(|_| unusable())
    }

    /// Stores a ceremony's state under a new id: answers the id.
    async fn park(&self, user_id: Option<Uuid>, state: Value) -> Result<String, AuthError> {
        let id = secret::new_session_token();
        let now = self.sign_in.now();
        let ceremony = NewCeremony {
            token_hash: secret::hash_secret(&id),
            user_id,
            state,
            expires_at: now + Duration::minutes(CEREMONY_MINUTES),
        };
        if self
            .sign_in
            .store
            .start_ceremony(ceremony, MAX_CEREMONIES, now)
            .await?
        {
            Ok(id)
        } else {
            Err(AuthError::Busy)
        }
    }

    /// Starts registering a passkey for the caller (a resident key with
    /// user verification; the caller's passkeys excluded).
    pub async fn start_registration(
        &self,
        caller: &Principal,
        origin: &Origin,
    ) -> Result<CeremonyStart, AuthError> {
        self.sign_in.take_account_call(origin).await?;
        self.sign_in.check_factor_change(caller, true).await?;
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        let store = &self.sign_in.store;
        let user = store
            .user(caller.user_id)
            .await?
            .ok_or(AuthError::AuthenticationRequired)?;
        let exclude = store
            .passkeys(caller.user_id)
            .await?
            .into_iter()
            .map(|p| p.credential_id)
            .collect();
        let display = user.name.as_deref().unwrap_or(&user.email);
        let (ccr, state) = webauthn
            .start_passkey_registration(user.id, &user.email, display, Some(exclude))
            .map_err(|e| AuthError::Store(StoreError::Internal(e.to_string())))?;
        let mut options = to_value(&ccr.public_key)?;
        // Discoverable, so that a sign-in needs no email first.
        options["authenticatorSelection"] = json!({
            "residentKey": "required",
            "requireResidentKey": true,
            "userVerification": "required",
        });
        let challenge_id = self.park(Some(user.id), to_value(&state)?).await?;
        Ok(CeremonyStart {
            challenge_id,
            options,
        })
    }

    /// Finishes a registration of the caller with the authenticator's
    /// answer: stores the passkey, named `name` (default "Passkey"). An
    /// answer that does not check out is refused and stores nothing; the
    /// ceremony is used either way. The caller's session counts from then
    /// on as made with a passkey.
    pub async fn finish_registration(
        &self,
        caller: &Principal,
        challenge_id: &str,
        credential: Value,
        name: Option<&str>,
        origin: &Origin,
    ) -> Result<PasskeyInfo, AuthError> {
        let name = short_text(name.unwrap_or("Passkey"), "name", NAME_MAX)?;
        self.sign_in.check_factor_change(caller, true).await?;
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        let now = self.sign_in.now();
        let refused =
            || kernel::FieldError::new("credential", "does not check out against this challenge");
        let state = self
            .sign_in
            .store
            .take_registration(&secret::hash_secret(challenge_id), caller.user_id, now)
            .await?
            .ok_or_else(|| kernel::FieldError::new("challengeId", "is unknown, used or expired"))?;
        let state: PasskeyRegistration =
            serde_json::from_value(state).map_err(|e| StoreError::Internal(e.to_string()))?;
        let answer: RegisterPublicKeyCredential =
            serde_json::from_value(credential).map_err(|_| refused())?;
        let passkey = webauthn
            .finish_passkey_registration(&answer, &state)
            .map_err(|_| refused())?;
        let info = PasskeyInfo {
            id: new_id(),
            name,
            credential_id: passkey.cred_id().to_vec(),
            created_at: now,
            last_used_at: None,
        };
        let event = AuditEvent::new(
            caller.actor(),
            "passkey.add",
            target("passkey", info.id),
            origin.ip.clone(),
        )
        .with_details(json!({ "name": info.name }));
        let permissions::Credential::Session { id: session_id } = caller.credential else {
            return Err(AuthError::AuthenticationRequired);
        };
        let new = NewPasskey {
            user_id: caller.user_id,
            session_id,
            info: info.clone(),
            credential: to_value(&passkey)?,
        };
        match self
            .sign_in
            .store
            .add_passkey(new, MAX_PASSKEYS, event)
            .await?
        {
            PasskeyAdded::Added => Ok(info),
            PasskeyAdded::SessionEnded => Err(AuthError::SessionExpired),
            PasskeyAdded::Taken => Err(refused().into()),
            PasskeyAdded::Refused(gate) => {
                Err(gate.refusal(true).unwrap_or(AuthError::SessionExpired))
            }
            PasskeyAdded::TooMany => Err(StoreError::Conflict {
                field: None,
                message: format!(
                    "An account holds at most {MAX_PASSKEYS} passkeys; remove one first"
                )
                .into(),
            }
            .into()),
        }
    }

    /// The caller's passkeys, oldest first.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<PasskeyInfo>, AuthError> {
        Ok(self.sign_in.store.passkeys(caller.user_id).await?)
    }

    /// Removes one of the caller's passkeys.
    pub async fn remove(
        &self,
        caller: &Principal,
        id: Uuid,
        origin: &Origin,
    ) -> Result<(), AuthError> {
        self.sign_in.check_factor_change(caller, false).await?;
        let event = AuditEvent::new(
            caller.actor(),
            "passkey.remove",
            target("passkey", id),
            origin.ip.clone(),
        );
        if self
            .sign_in
            .store
            .delete_passkey(caller.user_id, id, event)
            .await?
        {
            Ok(())
        } else {
            Err(StoreError::NotFound.into())
        }
    }

    /// Starts a sign-in with a discoverable passkey (no account named).
    pub async fn start_login(&self) -> Result<CeremonyStart, AuthError> {
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        let (rcr, state) = webauthn
            .start_discoverable_authentication()
            .map_err(|e| AuthError::Store(StoreError::Internal(e.to_string())))?;
        let options = to_value(&rcr.public_key)?;
        let challenge_id = self.park(None, to_value(&state)?).await?;
        Ok(CeremonyStart {
            challenge_id,
            options,
        })
    }

    /// Finishes a passkey sign-in: answers what a sign-in answers. Every
    /// failure is the same [`AuthError::InvalidCredentials`]; the ceremony
    /// is used either way.
    pub async fn finish_login(
        &self,
        challenge_id: &str,
        credential: Value,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        // A sign-in attempt like a password's, before anything is looked at.
        self.sign_in
            .take_sign_in_attempt(&settings, &origin)
            .await?;
        let now = self.sign_in.now();
        let answer = serde_json::from_value::<PublicKeyCredential>(credential).ok();
        // The account the answer names (its user handle is the user's id).
        let (user_id, credential_id) = answer
            .as_ref()
            .and_then(|a| webauthn.identify_discoverable_authentication(a).ok())
            .map_or((Uuid::nil(), Vec::new()), |(user, id)| (user, id.to_vec()));
        let taken = self
            .sign_in
            .store
            .take_login(
                &secret::hash_secret(challenge_id),
                &credential_id,
                user_id,
                now,
            )
            .await?;
        let (Some(answer), Some((state, Some(stored)))) = (answer, taken) else {
            return Err(AuthError::InvalidCredentials);
        };
        let state: DiscoverableAuthentication =
            serde_json::from_value(state).map_err(|e| StoreError::Internal(e.to_string()))?;
        let mut passkey: Passkey = serde_json::from_value(stored.credential.clone())
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let checked = match webauthn.finish_discoverable_authentication_v2(&answer, state, &passkey)
        {
            Ok(result) => result,
            Err(e) => {
                // The signature, the flags, or a counter that did not move
                // forward (a cloned authenticator).
                let event = AuditEvent::new(
                    Actor::user(stored.user_id),
                    "auth.login_failed",
                    target("user", stored.user_id),
                    origin.ip.clone(),
                )
                .with_details(json!({ "reason": "passkey_refused", "detail": e.to_string() }));
                self.sign_in
                    .store
                    .record_login_failure(Some(stored.user_id), FailureEffect::Keep, event)
                    .await?;
                return Err(AuthError::InvalidCredentials);
            }
        };
        passkey.update_credential(&checked);
        let sign_count = stored.sign_count.max(i64::from(checked.counter()));
        let (token, mut session) =
            self.sign_in
                .new_session(stored.user_id, SignInMethod::Passkey, &settings, &origin);
        session.factor = Some(SecondFactor::Passkey);
        let event = AuditEvent::new(
            Actor::user(stored.user_id),
            "auth.login",
            target("session", session.id),
            origin.ip.clone(),
        )
        .with_details(json!({ "method": "passkey", "passkey": stored.id }));
        let used = PasskeySignIn {
            credential: to_value(&passkey)?,
            passkey: stored,
            sign_count,
            require_verified: settings.email_verification_required(),
        };
        match self
            .sign_in
            .store
            .sign_in_with_passkey(used, session, now, event)
            .await?
        {
            Some(user) => Ok((token, user)),
            None => Err(AuthError::InvalidCredentials),
        }
    }
}

impl PasskeyService {
    /// The options to finish the sign-in challenge `challenge` with a
    /// passkey of its account (API.md 17): single-use, 5 minutes, limited
    /// to that account's passkeys; a newer call replaces them.
    pub async fn mfa_options(&self, challenge: &str) -> Result<Value, AuthError> {
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        let now = self.sign_in.now();
        let hash = secret::hash_secret(challenge);
        let store = &self.sign_in.store;
        let (user_id, stored) = store
            .challenge_passkeys(&hash, now)
            .await?
            .ok_or(AuthError::InvalidToken)?;
        let passkeys: Vec<Passkey> = stored
            .into_iter()
            .filter_map(|credential| serde_json::from_value(credential).ok())
            .collect();
        if passkeys.is_empty() {
            return Err(kernel::FieldError::new(
                "challenge",
                "this account has no passkey; finish with a TOTP or recovery code",
            )
            .into());
        }
        let (rcr, state) = webauthn
            .start_passkey_authentication(&passkeys)
            .map_err(|e| AuthError::Store(StoreError::Internal(e.to_string())))?;
        let ceremony = NewCeremony {
            token_hash: hash,
            user_id: Some(user_id),
            state: to_value(&state)?,
            expires_at: now + Duration::minutes(CEREMONY_MINUTES),
        };
        if !store.park_challenge_ceremony(ceremony, now).await? {
            return Err(AuthError::InvalidToken);
        }
        to_value(&rcr.public_key)
    }

    /// Finishes the sign-in challenge `challenge` with a passkey assertion
    /// of its account: answers what the sign-in would have. An assertion
    /// that does not check out counts like a wrong code (401
    /// INVALID_MFA_CODE); the options are used either way.
    pub async fn verify_mfa(
        &self,
        challenge: &str,
        credential: Value,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.sign_in.settings.heeded().await?;
        let webauthn = self.relying_party(&settings)?;
        let (hash, record) = self.sign_in.take_challenge_attempt(challenge).await?;
        let answer = serde_json::from_value::<PublicKeyCredential>(credential).ok();
        let credential_id = answer.as_ref().map_or(&[][..], |a| a.raw_id.as_slice());
        let taken = self
            .sign_in
            .store
            .take_challenge_ceremony(&hash, record.user_id, credential_id, self.sign_in.now())
            .await?;
        let proof = match (answer, taken) {
            (Some(answer), Some((state, Some(stored)))) if !record.locked => {
                let state: PasskeyAuthentication = serde_json::from_value(state)
                    .map_err(|e| StoreError::Internal(e.to_string()))?;
                let mut passkey: Passkey = serde_json::from_value(stored.credential.clone())
                    .map_err(|e| StoreError::Internal(e.to_string()))?;
                match webauthn.finish_passkey_authentication(&answer, &state) {
                    // The ceremony checked the counter the passkey had when
                    // it began; one that did not move past the stored count
                    // since (a cloned authenticator, or one that went back to
                    // zero) is refused here.
                    Ok(checked)
                        if (checked.counter() != 0 || stored.sign_count != 0)
                            && i64::from(checked.counter()) <= stored.sign_count =>
                    {
                        None
                    }
                    Ok(checked) => {
                        passkey.update_credential(&checked);
                        Some(MfaProof::Passkey(PasskeyUse {
                            id: stored.id,
                            sign_count: stored.sign_count,
                            credential: to_value(&passkey)?,
                            new_count: stored.sign_count.max(i64::from(checked.counter())),
                        }))
                    }
                    Err(_) => None,
                }
            }
            _ => None,
        };
        self.sign_in
            .settle_challenge(&hash, &record, proof, origin)
            .await
    }
}

/// `value` as JSON (the library's types always serialise).
fn to_value(value: &impl serde::Serialize) -> Result<Value, AuthError> {
    serde_json::to_value(value).map_err(|e| AuthError::Store(StoreError::Internal(e.to_string())))
}
