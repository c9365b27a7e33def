//! A snapshot's settings, checked as `PATCH /admin/api/settings` checks
//! them; the session-only ones are refused.

use crate::db::Txn;
use kernel::FieldError;
use kernel::StoreError;
use kernel::settings::{Settings, SettingsPatch};
use serde_json::{Map, Value as Json};

use super::{Memo, ROLE_ID, id_of};
use crate::query::Query;
use crate::{PgStore, execute, rows, stmt};

/// The settings stored, with a diff's earlier steps' values over them.
pub(super) async fn current(txn: &Txn, memo: &Memo) -> Result<Settings, StoreError> {
    let mut stored: Map<String, Json> = txn
        .fetch_all(stmt("SELECT key, value FROM svc.settings", []))
        .await?
        .iter()
        .map(|r| {
            Ok((
                rows::column::<String>(r, "key")?,
                rows::column::<Json>(r, "value")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    stored.extend(memo.settings.clone());
    Ok(Settings::from_stored(stored))
}

/// Sets `key` (a setting the plan allows) to `value` (a role named by
/// name for the registration role);
/// a diff keeps the value in the memo instead.
pub(super) async fn set(
    store: &PgStore,
    txn: &Txn,
    key: &str,
    value: &Json,
    dry: bool,
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let path = format!("settings.{key}");
    let value = if key == "auth.registration_role_id" && !value.is_null() {
        let role = id_of(txn, ROLE_ID, value.as_str().unwrap_or_default(), &path).await?;
        Json::String(role.to_string())
    } else {
        value.clone()
    };
    let current = current(txn, memo).await?;
    let mut body = Map::new();
    body.insert(key.to_owned(), value);
    let patch = SettingsPatch::parse(&body, &current)
        .map_err(|e| FieldError::new(format!("settings.{}", e.field), e.message))?;
    if dry {
        memo.settings.extend(patch.values);
        return Ok(());
    }
    for (key, value) in patch.values {
        execute(
            txn,
            "INSERT INTO svc.settings (key, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
            vec![key.into(), value.into(), store.now().into()],
        )
        .await?;
    }
    Ok(())
}
