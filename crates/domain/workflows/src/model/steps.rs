//! The step types, each with its fields and its own parser; `Action` ties
//! them together.

use kernel::FieldError;
use kernel::filter::Filter;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{DELAY_MAX_MS, HTTP_TIMEOUT_MAX_MS, resource_name, serialized, typed};
use crate::template;

/// One step: its id, what it does, and how a failure is handled.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Unique within the definition; its output is at `steps.<id>.result`.
    pub id: String,
    /// What it does.
    pub action: Action,
    /// Attempts again after a failure, when set.
    pub retry: Option<Retry>,
    /// What a failure (after the last attempt) does.
    pub on_error: OnError,
}

/// `retry { attempts, backoffMs, factor }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retry {
    /// Attempts in all, the first included (1 to 10).
    pub attempts: u32,
    /// The wait before the second attempt, in milliseconds (at least 100).
    pub backoff_ms: u64,
    /// Each later wait is this many times the one before (default 2).
    #[serde(default = "two")]
    pub factor: f64,
}

fn two() -> f64 {
    2.0
}

/// What a step's failure does.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum OnError {
    /// The run fails (the default).
    #[default]
    Fail,
    /// The run goes on; the step's result is null and its error is at
    /// `steps.<id>.error`.
    Continue,
    /// These steps run (with `steps.<id>.error` set), then the run goes on.
    Steps(Vec<Step>),
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
    /// Runs steps once per item of an array.
    ForEach(ForEach),
    /// Runs another published workflow as a child run.
    Call(Call),
    /// Runs a JavaScript module in the sandbox.
    Script(Script),
}

/// `script { code, timeoutMs, memoryMb }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    /// The module; its default export is called with the run's context.
    pub code: String,
    /// CPU and waiting, 1 to 10,000 ms (default 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Heap, 1 to 64 MB (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

/// The longest a script may run, in milliseconds.
pub const SCRIPT_TIMEOUT_MAX_MS: u64 = 10_000;
/// The most heap a script may use, in megabytes.
pub const SCRIPT_MEMORY_MAX_MB: u64 = 64;
/// The longest a module may be, in bytes.
const SCRIPT_CODE_MAX_BYTES: usize = 100_000;

impl Script {
    /// Parses the step's fields at `at`; the module must compile (what its
    /// top level does is checked when the workflow is saved,
    /// [`scripts::check`]).
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let script: Self = typed(fields, at)?;
        if script
            .timeout_ms
            .is_some_and(|ms| !(1..=SCRIPT_TIMEOUT_MAX_MS).contains(&ms))
        {
            return Err(FieldError::new(
                format!("{at}.timeoutMs"),
                format!("must be 1 to {SCRIPT_TIMEOUT_MAX_MS}"),
            ));
        }
        if script
            .memory_mb
            .is_some_and(|mb| !(1..=SCRIPT_MEMORY_MAX_MB).contains(&mb))
        {
            return Err(FieldError::new(
                format!("{at}.memoryMb"),
                format!("must be 1 to {SCRIPT_MEMORY_MAX_MB}"),
            ));
        }
        if script.code.len() > SCRIPT_CODE_MAX_BYTES {
            return Err(FieldError::new(
                format!("{at}.code"),
                format!("must be at most {SCRIPT_CODE_MAX_BYTES} bytes"),
            ));
        }
        scripts::compile(&script.code)
            .map_err(|message| FieldError::new(format!("{at}.code"), message))?;
        Ok(script)
    }

    /// Its limits, defaults filled in.
    pub fn limits(&self) -> scripts::Limits {
        scripts::Limits {
            timeout: std::time::Duration::from_millis(self.timeout_ms.unwrap_or(1_000)),
            memory_bytes: usize::try_from(self.memory_mb.unwrap_or(16)).unwrap_or(16) << 20,
        }
    }
}

/// `forEach { items, steps, concurrency }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ForEach {
    /// An array, or a template giving one.
    pub items: Value,
    /// The steps of each iteration, with `item` and `index` in the context.
    pub steps: Vec<Step>,
    /// Iterations at once (1 to 10).
    pub concurrency: u32,
}

/// `call { workflow, input }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The called workflow's slug.
    pub workflow: String,
    /// The child's `start.data`, rendered.
    #[serde(default)]
    pub input: Value,
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

fn steps_json(steps: &[Step]) -> Value {
    Value::Array(steps.iter().map(Step::to_json).collect())
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
            Action::ForEach(_) => "forEach",
            Action::Call(_) => "call",
            Action::Script(_) => "script",
        }
    }
}

impl Query {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let query: Self = typed(fields, at)?;
        resource_name(&query.resource, at)?;
        if let Some(filter) = &query.filter {
            Filter::parse(filter, &format!("{at}.filter"))?;
        }
        Ok(query)
    }
}

impl Insert {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let insert: Self = typed(fields, at)?;
        resource_name(&insert.resource, at)?;
        Ok(insert)
    }
}

impl Update {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let update: Self = typed(fields, at)?;
        resource_name(&update.resource, at)?;
        Ok(update)
    }
}

impl Delete {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let delete: Self = typed(fields, at)?;
        resource_name(&delete.resource, at)?;
        Ok(delete)
    }
}

impl Http {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let mut http: Self = typed(fields, at)?;
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
        Ok(http)
    }
}

impl Delay {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let delay: Self = typed(fields, at)?;
        match &delay.ms {
            Value::Number(n) if n.as_u64().is_some_and(|ms| ms <= DELAY_MAX_MS) => {}
            Value::String(s) if template::paths(&Value::String(s.clone())).next().is_some() => {}
            _ => {
                return Err(FieldError::new(
                    format!("{at}.ms"),
                    format!("must be 0 to {DELAY_MAX_MS} milliseconds or a template"),
                ));
            }
        }
        Ok(delay)
    }
}

impl Fail {
    /// Parses the step's fields at `at`.
    pub(crate) fn parse(fields: Value, at: &str) -> Result<Self, FieldError> {
        let fail: Self = typed(fields, at)?;
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
        Ok(fail)
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
                map.insert("then".into(), steps_json(&c.then));
                map.insert("else".into(), steps_json(&c.otherwise));
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
            Action::ForEach(f) => {
                let mut map = Map::new();
                map.insert("items".into(), f.items.clone());
                map.insert("steps".into(), steps_json(&f.steps));
                map.insert("concurrency".into(), f.concurrency.into());
                map
            }
            Action::Call(a) => serialized(a),
            Action::Script(a) => serialized(a),
        };
        map.insert("id".into(), self.id.clone().into());
        map.insert("type".into(), self.action.type_name().into());
        if let Some(retry) = &self.retry {
            map.insert("retry".into(), Value::Object(serialized(retry)));
        }
        match &self.on_error {
            OnError::Fail => {}
            OnError::Continue => {
                map.insert("onError".into(), "continue".into());
            }
            OnError::Steps(steps) => {
                map.insert("onError".into(), steps_json(steps));
            }
        }
        Value::Object(map)
    }

    /// Whether the step only computes from the context (nested steps
    /// included) and changes nothing outside the run: it is repeated rather
    /// than recorded when a run resumes (a script too: it reaches nothing
    /// outside its sandbox).
    pub fn is_pure(&self) -> bool {
        let own = matches!(
            self.action,
            Action::Transform(_)
                | Action::Condition(_)
                | Action::Finish(_)
                | Action::Fail(_)
                | Action::ForEach(_)
                | Action::Script(_)
        );
        own && self.retry.is_none() && self.nested().all(|list| list.iter().all(Step::is_pure))
    }

    /// The step lists nested in this step: a condition's branches, a loop's
    /// steps, the steps run on error.
    pub fn nested(&self) -> impl Iterator<Item = &[Step]> {
        let own: [&[Step]; 2] = match &self.action {
            Action::Condition(c) => [&c.then, &c.otherwise],
            Action::ForEach(f) => [&f.steps, &[]],
            _ => [&[], &[]],
        };
        let on_error: &[Step] = match &self.on_error {
            OnError::Steps(steps) => steps,
            _ => &[],
        };
        own.into_iter().chain(std::iter::once(on_error))
    }

    /// The fields that may hold templates, by name (nested steps excluded).
    pub(crate) fn template_fields(&self) -> Vec<(&'static str, Value)> {
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
            Action::ForEach(f) => vec![("items", f.items.clone())],
            Action::Call(a) => vec![("input", a.input.clone())],
            Action::Script(_) => Vec::new(),
        }
    }
}
