//! The trigger: a webhook (method, sync or async answer, access, the user
//! runs execute as) or a database event of a registered table.

use std::collections::HashSet;

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
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
    /// Data API writes of a table, each row before it is written (a hook).
    BeforeWrite(BeforeWrite),
    /// The ticks of a cron expression.
    Schedule(Schedule),
    /// Only `POST /admin/api/workflows/{id}/run`.
    Manual,
}

/// The schedule trigger's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// Five fields, or six with seconds first.
    pub cron: String,
    /// The IANA zone the expression is read in; none: `system.timezone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Whether the most recent tick missed while no instance ran is run.
    #[serde(default)]
    pub catch_up: bool,
    /// The user the runs act as.
    pub execute_as: Uuid,
}

impl Schedule {
    /// The expression, parsed: five fields or six with seconds first.
    fn parsed(cron: &str) -> Result<Cron, String> {
        CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| e.to_string())
    }

    /// The zone ticks are read in: the trigger's, else `fallback`.
    pub fn zone(&self, fallback: Tz) -> Tz {
        self.timezone
            .as_deref()
            .and_then(|zone| zone.parse().ok())
            .unwrap_or(fallback)
    }

    /// The first `count` ticks after `after`, read in `zone`. Ticks fall on
    /// whole seconds: times are cut to the second before the expression
    /// reads them.
    pub fn ticks_after(&self, after: DateTime<Utc>, zone: Tz, count: usize) -> Vec<DateTime<Utc>> {
        let Ok(cron) = Self::parsed(&self.cron) else {
            return Vec::new();
        };
        cron.iter_after(after.trunc_subsecs(0).with_timezone(&zone))
            .take(count)
            .map(|tick| tick.with_timezone(&Utc))
            .collect()
    }

    /// The first tick at or after `at`, read in `zone`.
    pub fn tick_at_or_after(&self, at: DateTime<Utc>, zone: Tz) -> Option<DateTime<Utc>> {
        let cron = Self::parsed(&self.cron).ok()?;
        let whole = at.trunc_subsecs(0);
        let at = if whole < at {
            whole + chrono::Duration::seconds(1)
        } else {
            whole
        };
        cron.find_next_occurrence(&at.with_timezone(&zone), true)
            .ok()
            .map(|tick| tick.with_timezone(&Utc))
    }

    /// The last tick at or before `at`, read in `zone`.
    pub fn tick_at_or_before(&self, at: DateTime<Utc>, zone: Tz) -> Option<DateTime<Utc>> {
        let cron = Self::parsed(&self.cron).ok()?;
        cron.find_previous_occurrence(&at.trunc_subsecs(0).with_timezone(&zone), true)
            .ok()
            .map(|tick| tick.with_timezone(&Utc))
    }
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

/// The write hook's trigger: the table and the writes it runs before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BeforeWrite {
    /// The registered table whose writes it runs before.
    pub resource_id: Uuid,
    /// The kinds of write.
    pub events: Vec<EventKind>,
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
            Some("beforeWrite") => {
                let mut hook: BeforeWrite = typed(Value::Object(object), "trigger")?;
                let mut seen = HashSet::new();
                hook.events.retain(|kind| seen.insert(*kind));
                if hook.events.is_empty() {
                    return Err(FieldError::new(
                        "trigger.events",
                        "must name at least one of insert, update, delete",
                    ));
                }
                Ok(Trigger::BeforeWrite(hook))
            }
            Some("schedule") => {
                if !object.contains_key("executeAs") {
                    return Err(FieldError::new(
                        "trigger.executeAs",
                        "is required for a schedule",
                    ));
                }
                let schedule: Schedule = typed(Value::Object(object), "trigger")?;
                if let Err(why) = Schedule::parsed(&schedule.cron) {
                    return Err(FieldError::new(
                        "trigger.cron",
                        format!(
                            "must be a cron expression of five fields, or six with seconds first ({why})"
                        ),
                    ));
                }
                if let Some(zone) = &schedule.timezone
                    && zone.parse::<Tz>().is_err()
                {
                    return Err(FieldError::new(
                        "trigger.timezone",
                        "must be an IANA time zone such as Europe/Paris",
                    ));
                }
                Ok(Trigger::Schedule(schedule))
            }
            Some("manual") => match object.keys().next() {
                Some(extra) => Err(FieldError::new(
                    format!("trigger.{extra}"),
                    "is not a field of a manual trigger",
                )),
                None => Ok(Trigger::Manual),
            },
            _ => Err(FieldError::new(
                "trigger.type",
                "must be webhook, dbEvent, beforeWrite, schedule or manual",
            )),
        }
    }

    /// The user runs act as, when the trigger names one.
    pub fn execute_as(&self) -> Option<Uuid> {
        match self {
            Trigger::Webhook(hook) => hook.execute_as,
            Trigger::DbEvent(event) => event.execute_as,
            Trigger::Schedule(schedule) => Some(schedule.execute_as),
            Trigger::BeforeWrite(_) | Trigger::Manual => None,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let (kind, mut map) = match self {
            Trigger::Webhook(hook) => ("webhook", serialized(hook)),
            Trigger::DbEvent(event) => ("dbEvent", serialized(event)),
            Trigger::BeforeWrite(hook) => ("beforeWrite", serialized(hook)),
            Trigger::Schedule(schedule) => ("schedule", serialized(schedule)),
            Trigger::Manual => ("manual", serde_json::Map::new()),
        };
        map.insert("type".into(), kind.into());
        Value::Object(map)
    }
}
