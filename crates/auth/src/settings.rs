//! The runtime settings: read from the shared cache, changed by
//! administrators with every change audited.

use std::sync::Arc;

use audit::AuditEvent;
use kernel::settings::{Settings, SettingsPatch};
use kernel::{FieldError, StoreError};
use permissions::Principal;
use serde_json::{Map, Value, json};

use crate::error::AuthError;
use crate::store::AuthStore;

/// Reads and changes the settings.
#[derive(Clone)]
pub struct SettingsService {
    store: Arc<dyn AuthStore>,
}

impl SettingsService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn AuthStore>) -> Self {
        Self { store }
    }

    /// The settings in force, secrets blanked.
    pub async fn settings(&self) -> Result<Map<String, Value>, AuthError> {
        Ok(self.store.settings().await?.public_view())
    }

    /// The settings in force, for other services (shared, not copied).
    pub async fn current(&self) -> Result<Arc<Settings>, AuthError> {
        Ok(self.store.settings().await?)
    }

    /// Lets the cache heed every change answered before this call, for a
    /// request without a credential (whose resolution would do it): one small
    /// round trip.
    pub async fn heed_changes(&self) -> Result<(), AuthError> {
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
    ) -> Result<Map<String, Value>, AuthError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_update(caller, body, ip.clone()).await {
                Err(AuthError::Store(StoreError::Stale)) if tries < 3 => continue,
                other => return other,
            }
        }
    }

    async fn try_update(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<Map<String, Value>, AuthError> {
        self.store.versions().await?;
        let mut settings = Settings::clone(&*self.store.settings().await?);
        let patch = SettingsPatch::parse(body, &settings)?;
        if patch.needs_session() && !caller.is_session() {
            return Err(AuthError::PermissionDenied(
                "This setting can only be changed by an administrator signed in with a session",
            ));
        }
        if let Some(role) = patch.registration_role_id()
            && !self.store.role_exists(role).await?
        {
            return Err(FieldError::new("auth.registration_role_id", "no such role").into());
        }
        let keys: Vec<&String> = patch.values.keys().collect();
        let event = AuditEvent::new(
            caller.actor(),
            "settings.update",
            Some("settings".into()),
            ip,
        )
        .with_details(json!({ "keys": keys }));
        self.store.save_settings(&patch, event).await?;
        settings.apply(&patch);
        Ok(settings.public_view())
    }
}
