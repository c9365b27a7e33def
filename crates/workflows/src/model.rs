//! The workflow definition (API.md section 6): a trigger and the steps it
//! runs, parsed from JSON with the path of every refused field, and checked
//! as a whole (unique step ids, templates naming only earlier steps, trigger
//! combinations).

use std::collections::HashSet;

use kernel::FieldError;
use kernel::filter::Filter;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::template;

/// Default and largest wait of a synchronous webhook, in seconds.
pub const WAIT_SECONDS_DEFAULT: u32 = 30;
/// Most steps in one definition, nested ones included.
pub const STEPS_MAX: usize = 100;
/// Deepest nesting of conditions.
const DEPTH_MAX: usize = 8;
/// Longest delay step, in milliseconds.
pub const DELAY_MAX_MS: u64 = 3_600_000;
/// Default timeout of the http step, in milliseconds.
pub const HTTP_TIMEOUT_DEFAULT_MS: u64 = 10_000;
/// Longest timeout of the http step, in milliseconds.
pub const HTTP_TIMEOUT_MAX_MS: u64 = 60_000;

/// What starts a workflow, and the steps it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The trigger.
    pub trigger: Trigger,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

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

/// One step: its id and what it does.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Unique within the definition; its output is at `steps.<id>.result`.
    pub id: String,
    /// What it does.
    pub action: Action,
}

/// What a step does. Values may hold `{{path}}` templates.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Builds a value.
    Transform(Transform),
    /// Runs one branch or the other.
    Condition(Condition),
    /// Lists rows under the run user's grants.
    Query(Query),
    /// Inserts a row (or rows).
    Insert(Insert),
    /// Updates a row by primary key.
    Update(Update),
    /// Deletes a row by primary key.
    Delete(Delete),
    /// Calls another system.
    Http(Http),
    /// Waits.
    Delay(Delay),
    /// Ends the run SUCCEEDED with a result.
    Finish(Finish),
    /// Ends the run FAILED with an error.
    Fail(Fail),
}

/// `transform { output }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transform {
    /// The result, rendered.
    pub output: Value,
}

/// `condition { if, then, else }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// A filter whose keys are context paths.
    pub test: Value,
    /// Steps when it holds.
    pub then: Vec<Step>,
    /// Steps otherwise.
    pub otherwise: Vec<Step>,
}

/// `query { resource, filter, sort, limit }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// `"<schema>.<table>"`.
    pub resource: String,
    /// The Data API filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    /// The Data API sort, such as `-created_at,id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<Value>,
    /// At most this many rows (1..1000, default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Value>,
}

/// `insert { resource, data }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Insert {
    /// `"<schema>.<table>"`.
    pub resource: String,
    /// A row or an array of rows.
    pub data: Value,
}

/// `update { resource, key, data }`: the row's primary key is `key`, since
/// `id` names the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    /// `"<schema>.<table>"`.
    pub resource: String,
    /// The primary key.
    pub key: Value,
    /// The columns to set.
    pub data: Value,
}

/// `delete { resource, key }`: the row's primary key is `key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delete {
    /// `"<schema>.<table>"`.
    pub resource: String,
    /// The primary key.
    pub key: Value,
}

/// `http { method, url, headers, body, timeoutMs, signingSecret }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Http {
    /// GET, POST, PUT, PATCH, DELETE or HEAD (default GET).
    #[serde(default = "get")]
    pub method: String,
    /// An http or https URL.
    pub url: String,
    /// Header names and values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Value>,
    /// The JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Milliseconds before the call is abandoned (default 10 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Signs the body in a `Tessera-Signature` header when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

fn get() -> String {
    "GET".to_owned()
}

/// `delay { ms }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delay {
    /// Milliseconds (a number or a template).
    pub ms: Value,
}

/// `finish { result }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finish {
    /// The run's result, rendered.
    #[serde(default)]
    pub result: Value,
}

/// `fail { code, message }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fail {
    /// The error code of the run.
    pub code: String,
    /// The error message, rendered.
    #[serde(default)]
    pub message: Value,
}

/// HTTP methods the http step may use.
pub const HTTP_METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

impl Action {
    /// The step type's name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Action::Transform(_) => "transform",
            Action::Condition(_) => "condition",
            Action::Query(_) => "query",
            Action::Insert(_) => "insert",
            Action::Update(_) => "update",
            Action::Delete(_) => "delete",
            Action::Http(_) => "http",
            Action::Delay(_) => "delay",
            Action::Finish(_) => "finish",
            Action::Fail(_) => "fail",
        }
    }

    /// Whether the step only computes from the context: it is repeated
    /// rather than recorded when a run resumes.
    pub fn is_pure(&self) -> bool {
        matches!(
            self,
            Action::Transform(_) | Action::Condition(_) | Action::Finish(_) | Action::Fail(_)
        )
    }
}

/// Parses `value` as `T`; a refused field is named under `path`.
fn typed<T: DeserializeOwned>(value: Value, path: &str) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let inner = err.path().to_string();
        let field = if inner == "." {
            path.to_owned()
        } else {
            format!("{path}.{inner}")
        };
        let message = err.into_inner().to_string();
        let message = message
            .split(" at line")
            .next()
            .unwrap_or_default()
            .to_owned();
        FieldError::new(field, message)
    })
}

fn serialized<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

impl Definition {
    /// Parses `{ trigger, steps }` and checks it as a whole; `max_wait_ms`
    /// is the current `workflows.max_sync_wait_ms`.
    pub fn parse(trigger: &Value, steps: &Value, max_wait_ms: u64) -> Result<Self, FieldError> {
        let trigger = Trigger::parse(trigger, max_wait_ms)?;
        let items = steps
            .as_array()
            .ok_or_else(|| FieldError::new("steps", "must be an array of steps"))?;
        let mut parser = StepParser::default();
        let steps = parser.list(items, "steps", 0)?;
        Ok(Self { trigger, steps })
    }

    /// The trigger as stored and shown.
    pub fn trigger_json(&self) -> Value {
        self.trigger.to_json()
    }

    /// The steps as stored and shown.
    pub fn steps_json(&self) -> Value {
        Value::Array(self.steps.iter().map(Step::to_json).collect())
    }

    /// `{ trigger, steps }`, as a run's stored definition.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "trigger": self.trigger_json(), "steps": self.steps_json() })
    }

    /// Parses a stored `{ trigger, steps }` without the wait limit (it was
    /// checked when saved).
    pub fn from_stored(stored: &Value) -> Result<Self, FieldError> {
        Self::parse(&stored["trigger"], &stored["steps"], u64::MAX)
    }

    /// Whether every step only computes from the context (no data, http or
    /// delay step): such a run ends at once and is stored once, finished.
    pub fn is_pure(&self) -> bool {
        fn all(steps: &[Step]) -> bool {
            steps.iter().all(|step| match &step.action {
                Action::Condition(c) => all(&c.then) && all(&c.otherwise),
                action => action.is_pure(),
            })
        }
        all(&self.steps)
    }

    /// Whether a template reads `user.*` (the run's user is loaded only then).
    pub fn reads_user(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|step| {
                let own = step.template_fields().iter().any(|(_, value)| {
                    template::paths(value).any(|path| path == "user" || path.starts_with("user."))
                });
                own || match &step.action {
                    Action::Condition(c) => any(&c.then) || any(&c.otherwise),
                    _ => false,
                }
            })
        }
        any(&self.steps)
    }
}

impl Trigger {
    fn parse(value: &Value, max_wait_ms: u64) -> Result<Self, FieldError> {
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

    fn to_json(&self) -> Value {
        let (kind, mut map) = match self {
            Trigger::Webhook(hook) => ("webhook", serialized(hook)),
            Trigger::DbEvent(event) => ("dbEvent", serialized(event)),
        };
        map.insert("type".into(), kind.into());
        Value::Object(map)
    }
}

impl Step {
    /// The step as stored and shown: `{ id, type, ...fields }`.
    pub fn to_json(&self) -> Value {
        let mut map = match &self.action {
            Action::Transform(a) => serialized(a),
            Action::Condition(c) => {
                let mut map = Map::new();
                map.insert("if".into(), c.test.clone());
                map.insert(
                    "then".into(),
                    Value::Array(c.then.iter().map(Step::to_json).collect()),
                );
                map.insert(
                    "else".into(),
                    Value::Array(c.otherwise.iter().map(Step::to_json).collect()),
                );
                map
            }
            Action::Query(a) => serialized(a),
            Action::Insert(a) => serialized(a),
            Action::Update(a) => serialized(a),
            Action::Delete(a) => serialized(a),
            Action::Http(a) => serialized(a),
            Action::Delay(a) => serialized(a),
            Action::Finish(a) => serialized(a),
            Action::Fail(a) => serialized(a),
        };
        map.insert("id".into(), self.id.clone().into());
        map.insert("type".into(), self.action.type_name().into());
        Value::Object(map)
    }

    /// The fields that may hold templates, by name (nested steps excluded).
    fn template_fields(&self) -> Vec<(&'static str, Value)> {
        let strings = |s: &String| Value::String(s.clone());
        match &self.action {
            Action::Transform(a) => vec![("output", a.output.clone())],
            Action::Condition(c) => vec![("if", c.test.clone())],
            Action::Query(a) => vec![
                ("filter", a.filter.clone().unwrap_or_default()),
                ("sort", a.sort.clone().unwrap_or_default()),
                ("limit", a.limit.clone().unwrap_or_default()),
            ],
            Action::Insert(a) => vec![("data", a.data.clone())],
            Action::Update(a) => vec![("key", a.key.clone()), ("data", a.data.clone())],
            Action::Delete(a) => vec![("key", a.key.clone())],
            Action::Http(a) => vec![
                ("url", strings(&a.url)),
                ("headers", a.headers.clone().unwrap_or_default()),
                ("body", a.body.clone().unwrap_or_default()),
            ],
            Action::Delay(a) => vec![("ms", a.ms.clone())],
            Action::Finish(a) => vec![("result", a.result.clone())],
            Action::Fail(a) => vec![("message", a.message.clone())],
        }
    }
}

/// Parses step lists, tracking the ids seen and the ids that run before
/// the step being parsed.
#[derive(Default)]
struct StepParser {
    all: HashSet<String>,
    count: usize,
}

impl StepParser {
    /// Parses `items` at `path`; `before` are the steps that ran before it.
    fn list(&mut self, items: &[Value], path: &str, depth: usize) -> Result<Vec<Step>, FieldError> {
        let mut before: Vec<String> = self.all.iter().cloned().collect();
        self.list_after(items, path, depth, &mut before)
    }

    fn list_after(
        &mut self,
        items: &[Value],
        path: &str,
        depth: usize,
        before: &mut Vec<String>,
    ) -> Result<Vec<Step>, FieldError> {
        if depth > DEPTH_MAX {
            return Err(FieldError::new(path.to_owned(), "is nested too deeply"));
        }
        let mut steps = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            self.count += 1;
            if self.count > STEPS_MAX {
                return Err(FieldError::new(
                    at,
                    format!("is one step too many (at most {STEPS_MAX})"),
                ));
            }
            let step = self.step(item, &at, depth, before)?;
            before.push(step.id.clone());
            if let Action::Condition(c) = &step.action {
                before.extend(c.then.iter().chain(&c.otherwise).flat_map(ids));
            }
            steps.push(step);
        }
        Ok(steps)
    }

    fn step(
        &mut self,
        item: &Value,
        at: &str,
        depth: usize,
        before: &[String],
    ) -> Result<Step, FieldError> {
        let mut object = item
            .as_object()
            .cloned()
            .ok_or_else(|| FieldError::new(at.to_owned(), "must be an object"))?;
        let id = match object.remove("id") {
            Some(Value::String(id))
                if !id.is_empty()
                    && id.len() <= 64
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                id
            }
            _ => {
                return Err(FieldError::new(
                    format!("{at}.id"),
                    "must be 1 to 64 letters, digits, _ or -",
                ));
            }
        };
        if !self.all.insert(id.clone()) {
            return Err(FieldError::new(
                format!("{at}.id"),
                "is used by another step",
            ));
        }
        let kind = object.remove("type");
        let fields = Value::Object(object);
        let action = match kind.as_ref().and_then(Value::as_str) {
            Some("transform") => Action::Transform(typed(fields, at)?),
            Some("condition") => {
                let mut object = match fields {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                let test = object
                    .remove("if")
                    .ok_or_else(|| FieldError::new(format!("{at}.if"), "is required"))?;
                Filter::parse(&test, &format!("{at}.if"))?;
                let mut branch = |name: &str, parser: &mut Self| -> Result<Vec<Step>, FieldError> {
                    match object.remove(name) {
                        None | Some(Value::Null) => Ok(Vec::new()),
                        Some(Value::Array(items)) => {
                            let mut seen = before.to_vec();
                            seen.push(id.clone());
                            parser.list_after(&items, &format!("{at}.{name}"), depth + 1, &mut seen)
                        }
                        Some(_) => Err(FieldError::new(
                            format!("{at}.{name}"),
                            "must be an array of steps",
                        )),
                    }
                };
                let then = branch("then", self)?;
                let otherwise = branch("else", self)?;
                if let Some(extra) = object.keys().next() {
                    return Err(FieldError::new(
                        format!("{at}.{extra}"),
                        "is not a field of a condition step",
                    ));
                }
                Action::Condition(Condition {
                    test,
                    then,
                    otherwise,
                })
            }
            Some("query") => {
                let query: Query = typed(fields, at)?;
                resource_name(&query.resource, at)?;
                if let Some(filter) = &query.filter {
                    Filter::parse(filter, &format!("{at}.filter"))?;
                }
                Action::Query(query)
            }
            Some("insert") => {
                let insert: Insert = typed(fields, at)?;
                resource_name(&insert.resource, at)?;
                Action::Insert(insert)
            }
            Some("update") => {
                let update: Update = typed(fields, at)?;
                resource_name(&update.resource, at)?;
                Action::Update(update)
            }
            Some("delete") => {
                let delete: Delete = typed(fields, at)?;
                resource_name(&delete.resource, at)?;
                Action::Delete(delete)
            }
            Some("http") => {
                let mut http: Http = typed(fields, at)?;
                http.method = http.method.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&http.method.as_str()) {
                    return Err(FieldError::new(
                        format!("{at}.method"),
                        format!("must be one of {}", HTTP_METHODS.join(", ")),
                    ));
                }
                if template::paths(&Value::String(http.url.clone()))
                    .next()
                    .is_none()
                    && !(http.url.starts_with("http://") || http.url.starts_with("https://"))
                {
                    return Err(FieldError::new(
                        format!("{at}.url"),
                        "must be an http or https URL",
                    ));
                }
                if http
                    .timeout_ms
                    .is_some_and(|ms| ms == 0 || ms > HTTP_TIMEOUT_MAX_MS)
                {
                    return Err(FieldError::new(
                        format!("{at}.timeoutMs"),
                        format!("must be 1 to {HTTP_TIMEOUT_MAX_MS}"),
                    ));
                }
                if http.headers.as_ref().is_some_and(|h| !h.is_object()) {
                    return Err(FieldError::new(
                        format!("{at}.headers"),
                        "must be an object of header names and values",
                    ));
                }
                Action::Http(http)
            }
            Some("delay") => {
                let delay: Delay = typed(fields, at)?;
                match &delay.ms {
                    Value::Number(n) if n.as_u64().is_some_and(|ms| ms <= DELAY_MAX_MS) => {}
                    Value::String(s)
                        if template::paths(&Value::String(s.clone())).next().is_some() => {}
                    _ => {
                        return Err(FieldError::new(
                            format!("{at}.ms"),
                            format!("must be 0 to {DELAY_MAX_MS} milliseconds or a template"),
                        ));
                    }
                }
                Action::Delay(delay)
            }
            Some("finish") => Action::Finish(typed(fields, at)?),
            Some("fail") => {
                let fail: Fail = typed(fields, at)?;
                if fail.code.is_empty()
                    || fail.code.len() > 64
                    || !fail
                        .code
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                {
                    return Err(FieldError::new(
                        format!("{at}.code"),
                        "must be UPPER_SNAKE, at most 64 characters",
                    ));
                }
                Action::Fail(fail)
            }
            _ => {
                return Err(FieldError::new(
                    format!("{at}.type"),
                    "must be one of transform, condition, query, insert, update, delete, http, delay, finish, fail",
                ));
            }
        };
        let step = Step { id, action };
        for (field, value) in step.template_fields() {
            check_templates(&value, before, &format!("{at}.{field}"))?;
        }
        Ok(step)
    }
}

/// Every step id in `step` and its branches.
fn ids(step: &Step) -> Vec<String> {
    let mut all = vec![step.id.clone()];
    if let Action::Condition(c) = &step.action {
        all.extend(c.then.iter().chain(&c.otherwise).flat_map(ids));
    }
    all
}

/// Checks that a data step names a table as `schema.table`.
fn resource_name(resource: &str, at: &str) -> Result<(), FieldError> {
    match resource.split_once('.') {
        Some((schema, table))
            if !schema.is_empty() && !table.is_empty() && !table.contains('.') =>
        {
            Ok(())
        }
        _ => Err(FieldError::new(
            format!("{at}.resource"),
            "must be \"<schema>.<table>\"",
        )),
    }
}

/// Refuses templates with an unknown root or naming a step that does not run before.
fn check_templates(value: &Value, before: &[String], field: &str) -> Result<(), FieldError> {
    for path in template::paths(value) {
        let mut parts = path.split('.');
        match parts.next() {
            Some("start" | "user") => {}
            Some("steps") => match parts.next() {
                Some(id) if before.iter().any(|b| b == id) => {}
                _ => {
                    return Err(FieldError::new(
                        field.to_owned(),
                        format!("{{{{{path}}}}} names a step that does not run before this one"),
                    ));
                }
            },
            _ => {
                return Err(FieldError::new(
                    field.to_owned(),
                    format!("{{{{{path}}}}} must start with start, steps or user"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook() -> Value {
        json!({ "type": "webhook", "access": "public", "executeAs": Uuid::nil() })
    }

    fn refused(trigger: Value, steps: Value) -> String {
        Definition::parse(&trigger, &steps, 30_000)
            .err()
            .map(|e| e.field.into_owned())
            .unwrap_or_default()
    }

    #[test]
    fn parses_the_example_and_fills_sync_defaults() {
        let steps = json!([
            { "id": "greet", "type": "transform", "output": { "hello": "{{start.data.body.name}}" } },
            { "id": "done", "type": "finish", "result": "{{steps.greet.result}}" }
        ]);
        let def = Definition::parse(&hook(), &steps, 30_000).unwrap();
        assert_eq!(def.steps.len(), 2);
        let trigger = def.trigger_json();
        assert_eq!(trigger["waitSeconds"], 30);
        assert_eq!(trigger["onTimeout"], "continue");
        assert_eq!(trigger["method"], "POST");
        assert_eq!(def.steps_json(), steps);
        assert_eq!(Definition::from_stored(&def.to_json()).unwrap(), def);
        assert!(!def.reads_user());
    }

    #[test]
    fn refuses_bad_definitions_with_their_field() {
        let t = hook;
        assert_eq!(
            refused(t(), json!([{ "id": "a", "type": "teleport" }])),
            "steps[0].type"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "a", "type": "finish" }, { "id": "a", "type": "finish" }])
            ),
            "steps[1].id"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "a", "type": "finish", "result": "{{steps.b.result}}" }, { "id": "b", "type": "finish" }])
            ),
            "steps[0].result"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "a", "type": "transform", "output": "{{steps.a.result}}" }])
            ),
            "steps[0].output"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "c", "type": "condition", "if": { "start.data.x": { "eq": 1 } },
                "then": [{ "id": "t", "type": "transform", "output": 1 }],
                "else": [{ "id": "e", "type": "finish", "result": "{{steps.t.result}}" }] }])
            ),
            "steps[0].else[0].result"
        );
        assert_eq!(
            refused(json!({ "type": "webhook", "access": "public" }), json!([])),
            "trigger.executeAs"
        );
        assert_eq!(
            refused(
                json!({ "type": "webhook", "access": "authenticated", "waitSeconds": 31 }),
                json!([])
            ),
            "trigger.waitSeconds"
        );
        assert_eq!(
            refused(
                json!({ "type": "webhook", "access": "authenticated", "response": "async", "onTimeout": "cancel" }),
                json!([])
            ),
            "trigger.onTimeout"
        );
        assert_eq!(
            refused(
                json!({ "type": "webhook", "access": "authenticated", "method": "PUT" }),
                json!([])
            ),
            "trigger.method"
        );
        assert_eq!(
            refused(json!({ "type": "cron" }), json!([])),
            "trigger.type"
        );
        assert_eq!(
            refused(
                json!({ "type": "dbEvent", "resourceId": Uuid::nil(), "events": [] }),
                json!([])
            ),
            "trigger.events"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "q", "type": "query", "resource": "orders" }])
            ),
            "steps[0].resource"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "h", "type": "http", "url": "ftp://x" }])
            ),
            "steps[0].url"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "h", "type": "transform", "output": 1, "extra": 2 }])
            ),
            "steps[0].extra"
        );
        assert_eq!(
            refused(t(), json!([{ "id": "d", "type": "delay", "ms": -1 }])),
            "steps[0].ms"
        );
        assert_eq!(
            refused(t(), json!([{ "id": "f", "type": "fail", "code": "lower" }])),
            "steps[0].code"
        );
        assert_eq!(
            refused(
                t(),
                json!([{ "id": "x", "type": "finish", "result": "{{env.HOME}}" }])
            ),
            "steps[0].result"
        );
    }

    #[test]
    fn steps_after_a_condition_may_read_its_branches() {
        let steps = json!([
            { "id": "c", "type": "condition", "if": { "start.data.body.n": { "gt": 1 } },
              "then": [{ "id": "big", "type": "transform", "output": "big" }],
              "else": [{ "id": "small", "type": "transform", "output": "{{steps.c.result}}" }] },
            { "id": "done", "type": "finish", "result": ["{{steps.big.result}}", "{{steps.small.result}}", "{{user.email}}"] }
        ]);
        let def = Definition::parse(&hook(), &steps, 30_000).unwrap();
        assert!(def.reads_user());
    }

    /// Any JSON as a trigger and steps: a definition or a refusal naming a
    /// field, never a panic.
    mod fuzz {
        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::Definition;

        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                prop::sample::select(vec![
                    "webhook",
                    "db_event",
                    "POST",
                    "GET",
                    "public",
                    "authenticated",
                    "sync",
                    "async",
                    "transform",
                    "condition",
                    "finish",
                    "http",
                    "query",
                    "insert",
                    "update",
                    "delete",
                    "{{start.data.body.x}}",
                    "{{a}}",
                    "app.t",
                    "insert",
                    "x",
                    "",
                ])
                .prop_map(|s| Value::String(s.to_owned())),
            ];
            leaf.prop_recursive(5, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop::sample::select(vec![
                            "type", "id", "method", "access", "mode", "result", "steps", "then",
                            "else", "if", "resource", "data", "filter", "url", "table", "events",
                            "slug", "next",
                        ])
                        .prop_map(str::to_owned),
                        inner,
                        0..5,
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn never_panics(trigger in json(), steps in json()) {
                if let Err(refused) = Definition::parse(&trigger, &steps, 30_000) {
                    prop_assert!(!refused.field.is_empty());
                }
            }
        }
    }
}
