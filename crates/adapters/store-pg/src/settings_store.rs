//! The runtime settings in `svc.settings`, cached per instance until a
//! round trip sees a newer settings version.

use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use kernel::settings::{Settings, SettingsPatch};
use kernel::{StoreError, Versions};
use sea_orm::sea_query::OnConflict;
use sea_orm::{EntityTrait, Set};
use serde_json::Map;
use settings::SettingsStore;
use uuid::Uuid;

use crate::entity::setting;
use crate::query::{Begin, Query, Stored};
use crate::{PgStore, commit_with_audit, execute, rows, stmt};

impl PgStore {
    /// The settings and the version they were read at, loaded again when a
    /// round trip has seen a newer one.
    pub(crate) async fn versioned_settings(&self) -> Result<(Arc<Settings>, i64), StoreError> {
        if let Some(cached) = self.settings.get(self.seen.settings()) {
            return Ok(cached);
        }
        let version = self.read_versions().await?.settings;
        let rows = setting::Entity::find().all(&self.db).stored().await?;
        let stored: Map<String, serde_json::Value> =
            rows.into_iter().map(|r| (r.key, r.value)).collect();
        let settings = Arc::new(Settings::from_stored(stored));
        self.statement_timeout
            .heed(&self.db, version, settings.data_statement_timeout_ms());
        self.replicas
            .heed_timeout(version, settings.data_statement_timeout_ms());
        self.settings.put(settings.clone(), version);
        Ok((settings, version))
    }
}

#[async_trait]
impl SettingsStore for PgStore {
    async fn settings(&self) -> Result<Arc<Settings>, StoreError> {
        Ok(self.versioned_settings().await?.0)
    }

    async fn save_settings(
        &self,
        patch: &SettingsPatch,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        let now = self.now();
        if !patch.merged_with.is_empty() {
            // Merged changes are made one at a time, each on the value it read.
            execute(
                &txn,
                "SELECT pg_advisory_xact_lock(hashtext('svc.settings'))",
                [],
            )
            .await?;
            let defaults = Settings::default();
            for (key, base) in &patch.merged_with {
                let stored: Option<serde_json::Value> = txn
                    .fetch_optional(stmt(
                        "SELECT value FROM svc.settings WHERE key = $1",
                        [key.as_str().into()],
                    ))
                    .await?
                    .map(|row| rows::column(&row, "value"))
                    .transpose()?;
                if stored.as_ref().unwrap_or(defaults.value(key)) != base {
                    return Err(StoreError::Stale);
                }
            }
        }
        for (key, value) in &patch.values {
            let row = setting::ActiveModel {
                key: Set(key.clone()),
                value: Set(value.clone()),
                updated_at: Set(now),
            };
            setting::Entity::insert(row)
                .on_conflict(
                    OnConflict::column(setting::Column::Key)
                        .update_columns([setting::Column::Value, setting::Column::UpdatedAt])
                        .to_owned(),
                )
                .exec_without_returning(&txn)
                .stored()
                .await?;
        }
        // Every instance (this one included) forgets its cache when this commits.
        txn.run(stmt(
            "SELECT pg_notify($1, '')",
            [crate::cache::SETTINGS_CHANNEL.into()],
        ))
        .await?;
        commit_with_audit(txn, event, self.now()).await?;
        self.settings.clear();
        Ok(())
    }

    async fn role_exists(&self, id: Uuid) -> Result<bool, StoreError> {
        Ok(crate::entity::role::Entity::find_by_id(id)
            .one(&self.db)
            .stored()
            .await?
            .is_some())
    }

    async fn versions(&self) -> Result<Versions, StoreError> {
        self.read_versions().await
    }
}
