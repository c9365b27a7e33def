//! The workflow definition (API.md section 6): a trigger and the steps it
//! runs, parsed from JSON with the path of every refused field, and checked
//! as a whole (unique step ids, templates naming only earlier steps, trigger
//! combinations). The trigger is in `trigger`, each step type with its own
//! parser in `steps`, the walk over step lists (ids, nesting, templates) in
//! `parser`.

mod parser;
mod steps;
#[cfg(test)]
mod tests;
mod trigger;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use kernel::FieldError;

use crate::template;

pub use steps::{
    Action, Call, Condition, Delay, Delete, Fail, Finish, ForEach, HTTP_METHODS, Http, Insert,
    OnError, Query, Retry, SCRIPT_MEMORY_MAX_MB, SCRIPT_TIMEOUT_MAX_MS, Script, Step, Transform,
    Update,
};
pub use trigger::{
    BeforeWrite, DbEvent, EventKind, OnTimeout, ResponseMode, Schedule, Trigger, Webhook,
    WebhookAccess, WebhookMethod,
};

/// Default and largest wait of a synchronous webhook, in seconds.
pub const WAIT_SECONDS_DEFAULT: u32 = 30;
/// Most steps in one definition, nested ones included.
pub const STEPS_MAX: usize = 100;
/// Deepest nesting of conditions.
pub(crate) const DEPTH_MAX: usize = 8;
/// Longest delay step, in milliseconds.
pub const DELAY_MAX_MS: u64 = 3_600_000;
/// Default timeout of the http step, in milliseconds.
pub const HTTP_TIMEOUT_DEFAULT_MS: u64 = 10_000;
/// Longest timeout of the http step, in milliseconds.
pub const HTTP_TIMEOUT_MAX_MS: u64 = 60_000;
/// Most attempts of a step with `retry`, the first included.
pub const RETRY_ATTEMPTS_MAX: u32 = 10;
/// Shortest first wait of `retry`, in milliseconds.
pub const RETRY_BACKOFF_MIN_MS: u64 = 100;
/// Longest wait between two attempts, in milliseconds (longer ones are cut).
pub const RETRY_WAIT_MAX_MS: u64 = 3_600_000;
/// Most items a `forEach` step iterates over.
pub const FOR_EACH_ITEMS_MAX: usize = 1000;
/// Most iterations of a `forEach` step at once.
pub const FOR_EACH_CONCURRENCY_MAX: u32 = 10;
/// Deepest child run: a call that would reach a deeper one fails.
pub const CALL_DEPTH_MAX: usize = 5;

/// What starts a workflow, and the steps it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The trigger.
    pub trigger: Trigger,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Definition {
    /// Parses `{ trigger, steps }` and checks it as a whole; `max_wait_ms`
    /// is the current `workflows.max_sync_wait_ms`.
    pub fn parse(trigger: &Value, steps: &Value, max_wait_ms: u64) -> Result<Self, FieldError> {
        let trigger = Trigger::parse(trigger, max_wait_ms)?;
        let items = steps
            .as_array()
            .ok_or_else(|| FieldError::new("steps", "must be an array of steps"))?;
        let mut parser = parser::StepParser::default();
        let steps = parser.list(items, "steps", 0)?;
        let definition = Self { trigger, steps };
        if matches!(definition.trigger, Trigger::BeforeWrite(_)) {
            definition.check_hook()?;
        }
        Ok(definition)
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

    /// Whether every step only computes from the context (no data, http,
    /// delay or call step, no retry): such a run ends at once and is stored
    /// once, finished.
    pub fn is_pure(&self) -> bool {
        self.steps.iter().all(Step::is_pure)
    }

    /// Whether a template reads `user.*`, or a script names `user` (the
    /// run's user is loaded only then: one query a run saved).
    pub fn reads_user(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|step| {
                let own = matches!(&step.action, Action::Script(s) if s.code.contains("user"))
                    || step.template_fields().iter().any(|(_, value)| {
                        template::paths(value)
                            .any(|path| path == "user" || path.starts_with("user."))
                    });
                own || step.nested().any(any)
            })
        }
        any(&self.steps)
    }

    /// Every `script` step with the field of its code, as the parser names
    /// fields (`steps[1].then[0].code`).
    pub fn scripts(&self) -> Vec<(String, &Script)> {
        let mut out = Vec::new();
        each_step(&self.steps, "steps", &mut |at, step| {
            if let Action::Script(script) = &step.action {
                out.push((format!("{at}.code"), script));
            }
        });
        out
    }

    /// Every `call` step's slug with the field that names it, as the parser
    /// names fields (`steps[2].then[0].workflow`).
    pub fn calls(&self) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        each_step(&self.steps, "steps", &mut |at, step| {
            if let Action::Call(call) = &step.action {
                out.push((format!("{at}.workflow"), call.workflow.as_str()));
            }
        });
        out
    }

    /// A write hook holds only steps that compute, read or end the run:
    /// the field of the first other one.
    fn check_hook(&self) -> Result<(), FieldError> {
        let mut refused = None;
        each_step(&self.steps, "steps", &mut |at, step| {
            let allowed = matches!(
                step.action,
                Action::Transform(_)
                    | Action::Condition(_)
                    | Action::Script(_)
                    | Action::Query(_)
                    | Action::ForEach(_)
                    | Action::Finish(_)
                    | Action::Fail(_)
            );
            if !allowed && refused.is_none() {
                refused = Some(format!("{at}.type"));
            }
        });
        match refused {
            None => Ok(()),
            Some(field) => Err(FieldError::new(
                field,
                "a beforeWrite workflow holds only transform, condition, script, query, \
                 forEach, finish and fail steps",
            )),
        }
    }
}

/// Calls `visit` with every step of `steps` and of the steps nested in
/// them (branches, loops, error handlers), each with its field path.
fn each_step<'d>(steps: &'d [Step], path: &str, visit: &mut impl FnMut(&str, &'d Step)) {
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{path}[{i}]");
        visit(&at, step);
        if let Action::Condition(c) = &step.action {
            each_step(&c.then, &format!("{at}.then"), visit);
            each_step(&c.otherwise, &format!("{at}.else"), visit);
        }
        if let Action::ForEach(f) = &step.action {
            each_step(&f.steps, &format!("{at}.steps"), visit);
        }
        if let OnError::Steps(handlers) = &step.on_error {
            each_step(handlers, &format!("{at}.onError"), visit);
        }
    }
}

/// Parses `value` as `T`; a refused field is named under `path`.
pub(crate) fn typed<T: DeserializeOwned>(value: Value, path: &str) -> Result<T, FieldError> {
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

pub(crate) fn serialized<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Checks that a data step names a table as `schema.table`.
pub(crate) fn resource_name(resource: &str, at: &str) -> Result<(), FieldError> {
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

/// Refuses templates with an unknown root or naming a step that does not
/// run before; `item` and `index` only inside a loop.
pub(crate) fn check_templates(
    value: &Value,
    before: &[String],
    in_loop: bool,
    field: &str,
) -> Result<(), FieldError> {
    for path in template::paths(value) {
        let mut parts = path.split('.');
        match parts.next() {
            Some("start" | "user") => {}
            Some("item" | "index") if in_loop => {}
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
                    if in_loop {
                        format!("{{{{{path}}}}} must start with start, steps, user, item or index")
                    } else {
                        format!("{{{{{path}}}}} must start with start, steps or user")
                    },
                ));
            }
        }
    }
    Ok(())
}
