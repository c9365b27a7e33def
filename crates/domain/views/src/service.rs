//! The view service: what DataViews and dashboards share. Their
//! administration is in `dataviews` and `dashboards`; every read of a
//! published view (the view route, dashboard widgets, an administrator's
//! preview) goes through the one reader of `reads`.

use std::sync::Arc;

use audit::AuditEvent;
use data::DataService;
use kernel::validate::{short_text, slug};
use kernel::{Clock, FieldError, StoreError};
use permissions::Principal;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::ViewError;
use crate::store::ViewStore;

/// Longest name of a DataView or dashboard, in characters.
const NAME_MAX: usize = 200;

/// DataViews and dashboards.
#[derive(Clone)]
pub struct ViewService {
    pub(crate) store: Arc<dyn ViewStore>,
    pub(crate) data: DataService,
    pub(crate) clock: Arc<dyn Clock>,
}

impl ViewService {
    /// A service over `store`; `data` resolves the callers of reads.
    pub fn new(store: Arc<dyn ViewStore>, data: DataService, clock: Arc<dyn Clock>) -> Self {
        Self { store, data, clock }
    }

    /// The audit event of `action` on the DataView or dashboard `id`.
    pub(crate) fn event(
        &self,
        caller: &Principal,
        action: &'static str,
        id: Uuid,
        ip: Option<String>,
    ) -> AuditEvent {
        let kind = action.split('.').next().unwrap_or(action);
        AuditEvent::new(caller.actor(), action, Some(format!("{kind}:{id}")), ip)
    }
}

/// The slug and name that DataViews and dashboards both carry, checked.
pub(crate) fn slug_and_name(body: &Map<String, Value>) -> Result<(String, String), FieldError> {
    let slug = slug(text(body, "slug"), "slug")?;
    let name = short_text(text(body, "name"), "name", NAME_MAX)?;
    Ok((slug, name))
}

/// The stored `fields` with those of `patch` over them: an update's body.
pub(crate) fn patched(
    mut fields: Map<String, Value>,
    patch: &Map<String, Value>,
) -> Map<String, Value> {
    fields.extend(patch.iter().map(|(k, v)| (k.clone(), v.clone())));
    fields
}

/// NOT_FOUND unless a record was there.
pub(crate) fn found(existed: bool) -> Result<(), ViewError> {
    if existed {
        Ok(())
    } else {
        Err(StoreError::NotFound.into())
    }
}

/// A text field of a body; empty when absent (the checks name it).
pub(crate) fn text<'b>(body: &'b Map<String, Value>, key: &str) -> &'b str {
    body.get(key).and_then(Value::as_str).unwrap_or_default()
}
