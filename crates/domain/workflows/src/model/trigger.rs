//! The trigger: a webhook (method, sync or async answer, access, the user
//! runs execute as) or a database event of a registered table.

use std::collections::HashSet;

use kernel::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{WAIT_SECONDS_DEFAULT, serialized, typed};

/// What starts runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// `POST|GET /api/workflows/{slug}/webhook`.
    Webhook(Webhook),
    /// Inserts, updates or deletes of a registered table.
    DbEvent(DbEvent),
}

/// The webhook trigger's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    /// The one method that answers.
    #[serde(default)]
    pub method: WebhookMethod,
    /// Whether the caller waits for the outcome.
    #[serde(default)]
    pub response: ResponseMode,
    /// How long a synchronous caller waits (sync only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
    /// What a synchronous timeout does to the run (sync only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<OnTimeout>,
    /// Public or authenticated.
    #[serde(default)]
    pub access: WebhookAccess,
    /// The user the run executes as (required for public webhooks).
    #[serde(default)]
    pub execute_as: Option<Uuid>,
}

/// The database-event trigger's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DbEvent {
    /// The registered table whose rows are watched.
    pub resource_id: Uuid,
    /// The kinds of change that start a run.
    pub events: Vec<EventKind>,
    /// The user the runs act as; empty: the longest-standing active administrator.
    #[serde(default)]
    pub execute_as: Option<Uuid>,
}

/// A kind of row change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A row was inserted.
    Insert,
    /// A row was updated.
    Update,
    /// A row was deleted.
    Delete,
}

impl EventKind {
    /// The name used in definitions and in `start.data.event`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Insert => "insert",
            EventKind::Update => "update",
            EventKind::Delete => "delete",
        }
    }
}

/// The webhook's method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WebhookMethod {
    /// POST with a JSON object or array.
    #[default]
    #[serde(rename = "POST")]
    Post,
    /// GET without a body.
    #[serde(rename = "GET")]
    Get,
}

impl WebhookMethod {
    /// The method's name, as in definitions and HTTP.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookMethod::Post => "POST",
            WebhookMethod::Get => "GET",
        }
    }
}

/// Whether a webhook caller waits for the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseMode {
    /// 200 with the outcome, or 504 after the wait.
    #[default]
    Sync,
    /// 202 with the run id at once.
    Async,
}

/// What a synchronous timeout does to the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// The run goes on in the background.
    #[default]
    Continue,
    /// The run ends CANCELLED at its next step boundary.
    Cancel,
}

/// Who may call a webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookAccess {
    /// Anyone with the URL; runs as Execute as.
    #[default]
    Public,
    /// A credential whose roles hold the invoke grant.
    Authenticated,
}

impl WebhookAccess {
    /// The name used in definitions.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookAccess::Public => "public",
            WebhookAccess::Authenticated => "authenticated",
        }
    }
}

impl Trigger {
    pub(crate) fn parse(value: &Value, max_wait_ms: u64) -> Result<Self, FieldError> {
        let mut object = value
            .as_object()
            .cloned()
            .ok_or_else(|| FieldError::new("trigger", "must be an object"))?;
        let kind = object.remove("type");
        match kind.as_ref().and_then(Value::as_str) {
            Some("webhook") => {
                let mut hook: Webhook = typed(Value::Object(object), "trigger")?;
                match hook.response {
                    ResponseMode::Async => {
                        if hook.wait_seconds.is_some() {
                            return Err(FieldError::new(
                                "trigger.waitSeconds",
                                "belongs to synchronous webhooks only",
                            ));
                        }
                        if hook.on_timeout.is_some() {
                            return Err(FieldError::new(
                                "trigger.onTimeout",
                                "belongs to synchronous webhooks only",
                            ));
                        }
                    }
                    ResponseMode::Sync => {
                        let wait = hook.wait_seconds.unwrap_or(WAIT_SECONDS_DEFAULT);
                        if wait == 0 || u64::from(wait) * 1000 > max_wait_ms {
                            return Err(FieldError::new(
                                "trigger.waitSeconds",
                                format!(
                                    "must be 1 to {} seconds (workflows.max_sync_wait_ms)",
                                    max_wait_ms / 1000
                                ),
                            ));
                        }
                        hook.wait_seconds = Some(wait);
                        hook.on_timeout = Some(hook.on_timeout.unwrap_or_default());
                    }
                }
                if hook.access == WebhookAccess::Public && hook.execute_as.is_none() {
                    return Err(FieldError::new(
                        "trigger.executeAs",
                        "is required for a public webhook",
                    ));
                }
                Ok(Trigger::Webhook(hook))
            }
            Some("dbEvent") => {
                let mut event: DbEvent = typed(Value::Object(object), "trigger")?;
                let mut seen = HashSet::new();
                event.events.retain(|kind| seen.insert(*kind));
                if event.events.is_empty() {
                    return Err(FieldError::new(
                        "trigger.events",
                        "must name at least one of insert, update, delete",
                    ));
                }
                Ok(Trigger::DbEvent(event))
            }
            _ => Err(FieldError::new(
                "trigger.type",
                "must be webhook or dbEvent",
            )),
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let (kind, mut map) = match self {
            Trigger::Webhook(hook) => ("webhook", serialized(hook)),
            Trigger::DbEvent(event) => ("dbEvent", serialized(event)),
        };
        map.insert("type".into(), kind.into());
        Value::Object(map)
    }
}
