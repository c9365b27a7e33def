//! The runtime settings (API.md section 9): read from the shared cache that
//! every instance keeps current, changed by administrators with every change
//! audited. The registry of keys, their checks and defaults is
//! [`kernel::settings`]; this crate reads and writes it through a
//! [`SettingsStore`].

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use kernel::settings::{Settings, SettingsPatch, trust_email_changes};
use kernel::{Code, ErrorCode, FieldError, StoreError, Versions};
use permissions::Principal;
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// Changes merged again on a fresh value before the change is refused as
/// stale.
const SAVE_ATTEMPTS: usize = 3;

/// Persistence of the settings.
#[async_trait]
pub trait SettingsStore: Send + Sync + 'static {
    /// The settings in force (shared: implementations cache them).
    async fn settings(&self) -> Result<Arc<Settings>, StoreError>;
    /// Stores validated setting values with the change's audit event, in
    /// one transaction; [`StoreError::Stale`] when a value it merged with
    /// was changed meanwhile.
    async fn save_settings(
        &self,
        patch: &SettingsPatch,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Reads the shared state's current versions, so the store's caches heed
    /// every change answered before.
    async fn versions(&self) -> Result<Versions, StoreError>;
    /// Whether a role exists (`auth.registration_role_id` must name one).
    async fn role_exists(&self, id: Uuid) -> Result<bool, StoreError>;
}

/// Why a settings change is refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A key or value is wrong.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The key may be changed only by an administrator's session.
    #[error("This setting can only be changed by an administrator signed in with a session")]
    SessionRequired,
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ErrorCode for SettingsError {
    fn code(&self) -> Code {
        match self {
            SettingsError::Invalid(e) => e.code(),
            SettingsError::SessionRequired => Code::PermissionDenied,
            SettingsError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            SettingsError::Invalid(e) => e.message(),
            SettingsError::Store(e) => e.message(),
            other => other.to_string().into(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            SettingsError::Invalid(e) => e.field(),
            SettingsError::Store(e) => e.field(),
            SettingsError::SessionRequired => None,
        }
    }
}

/// Reads and changes the settings.
#[derive(Clone)]
pub struct SettingsService {
    store: Arc<dyn SettingsStore>,
}

impl SettingsService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn SettingsStore>) -> Self {
        Self { store }
    }

    /// The settings in force, secrets blanked.
    pub async fn settings(&self) -> Result<Map<String, Value>, StoreError> {
        Ok(self.store.settings().await?.public_view())
    }

    /// The settings in force, for other services (shared, not copied).
    pub async fn current(&self) -> Result<Arc<Settings>, StoreError> {
        self.store.settings().await
    }

    /// The settings in force after heeding every change answered before
    /// this call, for a request without a credential (whose resolution
    /// would do it): one small round trip.
    pub async fn heeded(&self) -> Result<Arc<Settings>, StoreError> {
        self.store.versions().await?;
        self.store.settings().await
    }

    /// Lets the cache heed every change answered before this call.
    pub async fn heed_changes(&self) -> Result<(), StoreError> {
        self.store.versions().await?;
        Ok(())
    }

    /// Validates and stores setting changes; session-only keys refuse tokens.
    /// A change merged with a stored value that another request changed in
    /// the meantime is computed again on the fresh value.
    pub async fn update(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<Map<String, Value>, SettingsError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_update(caller, body, ip.clone()).await {
                Err(SettingsError::Store(StoreError::Stale)) if attempt < SAVE_ATTEMPTS => {}
                other => return other,
            }
        }
    }

    async fn try_update(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<Map<String, Value>, SettingsError> {
        let mut settings = Settings::clone(&*self.heeded().await?);
        let patch = SettingsPatch::parse(body, &settings)?;
        if patch.needs_session() && !caller.is_session() {
            return Err(SettingsError::SessionRequired);
        }
        if let Some(role) = patch.registration_role_id()
            && !self.store.role_exists(role).await?
        {
            return Err(FieldError::new("auth.registration_role_id", "no such role").into());
        }
        let keys: Vec<&String> = patch.values.keys().collect();
        let mut details = json!({ "keys": keys });
        // Trusting a provider's unverified emails is named in the audit.
        let trusted = match patch.values.get("auth.oauth") {
            Some(oauth) => trust_email_changes(settings.value("auth.oauth"), oauth),
            None => Map::new(),
        };
        if !trusted.is_empty() {
            details["trustEmail"] = Value::Object(trusted);
        }
        let event = AuditEvent::new(
            caller.actor(),
            "settings.update",
            Some("settings".into()),
            ip,
        )
        .with_details(details);
        self.store.save_settings(&patch, event).await?;
        settings.apply(&patch);
        Ok(settings.public_view())
    }
}
