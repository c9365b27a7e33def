//! The walk over step lists: unique ids, the nesting and step-count
//! limits, templates that name only steps running before, and the fields
//! every step may carry (`retry`, `onError`).

use std::collections::HashSet;

use kernel::FieldError;
use kernel::filter::Filter;
use serde_json::{Map, Value};

use super::steps::{
    Action, Call, Condition, Delay, Delete, Fail, ForEach, Http, Insert, OnError, Query, Retry,
    Script, Step, Update,
};
use super::{
    DEPTH_MAX, FOR_EACH_CONCURRENCY_MAX, RETRY_ATTEMPTS_MAX, RETRY_BACKOFF_MIN_MS, STEPS_MAX,
    check_templates, typed,
};
use crate::template;

/// The step types, as an error names them.
const TYPES: &str = "transform, condition, query, insert, update, delete, http, delay, finish, fail, forEach, call, script";

/// Parses step lists, tracking the ids seen and the ids that run before
/// the step being parsed.
#[derive(Default)]
pub(crate) struct StepParser {
    all: HashSet<String>,
    count: usize,
    /// How many loops enclose the list being parsed.
    loops: usize,
}

impl StepParser {
    /// Parses `items` at `path`; `before` are the steps that ran before it.
    pub(crate) fn list(
        &mut self,
        items: &[Value],
        path: &str,
        depth: usize,
    ) -> Result<Vec<Step>, FieldError> {
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
            // A branch's steps may be read after it (null when it did not
            // run); a loop's steps only inside the loop.
            if let Action::Condition(c) = &step.action {
                before.extend(c.then.iter().chain(&c.otherwise).flat_map(ids));
            }
            if let OnError::Steps(handler) = &step.on_error {
                before.extend(handler.iter().flat_map(ids));
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
        let retry = object
            .remove("retry")
            .map(|value| retry(value, at))
            .transpose()?;
        let on_error = object.remove("onError");
        let fields = Value::Object(object);
        let action = match kind.as_ref().and_then(Value::as_str) {
            Some("transform") => Action::Transform(typed(fields, at)?),
            Some("condition") => Action::Condition(self.condition(fields, at, &id, depth, before)?),
            Some("query") => Action::Query(Query::parse(fields, at)?),
            Some("insert") => Action::Insert(Insert::parse(fields, at)?),
            Some("update") => Action::Update(Update::parse(fields, at)?),
            Some("delete") => Action::Delete(Delete::parse(fields, at)?),
            Some("http") => Action::Http(Http::parse(fields, at)?),
            Some("delay") => Action::Delay(Delay::parse(fields, at)?),
            Some("finish") => Action::Finish(typed(fields, at)?),
            Some("fail") => Action::Fail(Fail::parse(fields, at)?),
            Some("forEach") => Action::ForEach(self.for_each(fields, at, depth, before)?),
            Some("call") => Action::Call(call(fields, at)?),
            Some("script") => Action::Script(Script::parse(fields, at)?),
            _ => {
                return Err(FieldError::new(
                    format!("{at}.type"),
                    format!("must be one of {TYPES}"),
                ));
            }
        };
        let on_error = match on_error {
            None | Some(Value::Null) => OnError::Fail,
            Some(Value::String(s)) if s == "fail" => OnError::Fail,
            Some(Value::String(s)) if s == "continue" => OnError::Continue,
            Some(Value::Array(items)) => {
                let mut seen = before.to_vec();
                seen.push(id.clone());
                OnError::Steps(self.list_after(
                    &items,
                    &format!("{at}.onError"),
                    depth + 1,
                    &mut seen,
                )?)
            }
            Some(_) => {
                return Err(FieldError::new(
                    format!("{at}.onError"),
                    "must be \"fail\", \"continue\" or an array of steps",
                ));
            }
        };
        let step = Step {
            id,
            action,
            retry,
            on_error,
        };
        for (field, value) in step.template_fields() {
            check_templates(&value, before, self.loops > 0, &format!("{at}.{field}"))?;
        }
        Ok(step)
    }

    /// A condition step: its test and both branches, parsed one level deeper.
    fn condition(
        &mut self,
        fields: Value,
        at: &str,
        id: &str,
        depth: usize,
        before: &[String],
    ) -> Result<Condition, FieldError> {
        let mut object = object_of(fields);
        let test = object
            .remove("if")
            .ok_or_else(|| FieldError::new(format!("{at}.if"), "is required"))?;
        Filter::parse(&test, &format!("{at}.if"))?;
        let mut branch = |name: &str, parser: &mut Self| -> Result<Vec<Step>, FieldError> {
            match object.remove(name) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => {
                    let mut seen = before.to_vec();
                    seen.push(id.to_owned());
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
        no_other_field(&object, at, "a condition")?;
        Ok(Condition {
            test,
            then,
            otherwise,
        })
    }

    /// A loop: its items, its concurrency, and its steps parsed one level
    /// deeper with `item` and `index` in reach.
    fn for_each(
        &mut self,
        fields: Value,
        at: &str,
        depth: usize,
        before: &[String],
    ) -> Result<ForEach, FieldError> {
        let mut object = object_of(fields);
        let items = object
            .remove("items")
            .ok_or_else(|| FieldError::new(format!("{at}.items"), "is required"))?;
        let is_template = matches!(&items, Value::String(s) if template::paths(&Value::String(s.clone())).next().is_some());
        if !items.is_array() && !is_template {
            return Err(FieldError::new(
                format!("{at}.items"),
                "must be an array or a template giving one",
            ));
        }
        let concurrency = match object.remove("concurrency") {
            None | Some(Value::Null) => 1,
            Some(value) => match value.as_u64() {
                Some(n) if (1..=u64::from(FOR_EACH_CONCURRENCY_MAX)).contains(&n) => n as u32,
                _ => {
                    return Err(FieldError::new(
                        format!("{at}.concurrency"),
                        format!("must be 1 to {FOR_EACH_CONCURRENCY_MAX}"),
                    ));
                }
            },
        };
        let Some(Value::Array(list)) = object.remove("steps") else {
            return Err(FieldError::new(
                format!("{at}.steps"),
                "must be an array of steps",
            ));
        };
        no_other_field(&object, at, "a forEach step")?;
        self.loops += 1;
        let mut seen = before.to_vec();
        let steps = self.list_after(&list, &format!("{at}.steps"), depth + 1, &mut seen);
        self.loops -= 1;
        Ok(ForEach {
            items,
            steps: steps?,
            concurrency,
        })
    }
}

/// `retry { attempts, backoffMs, factor }` at `at.retry`.
fn retry(value: Value, at: &str) -> Result<Retry, FieldError> {
    let field = format!("{at}.retry");
    let retry: Retry = typed(value, &field)?;
    if !(1..=RETRY_ATTEMPTS_MAX).contains(&retry.attempts) {
        return Err(FieldError::new(
            format!("{field}.attempts"),
            format!("must be 1 to {RETRY_ATTEMPTS_MAX}"),
        ));
    }
    if retry.backoff_ms < RETRY_BACKOFF_MIN_MS {
        return Err(FieldError::new(
            format!("{field}.backoffMs"),
            format!("must be at least {RETRY_BACKOFF_MIN_MS}"),
        ));
    }
    if !(1.0..=10.0).contains(&retry.factor) {
        return Err(FieldError::new(
            format!("{field}.factor"),
            "must be 1 to 10",
        ));
    }
    Ok(retry)
}

/// `call { workflow, input }`: the slug's shape here, its existence when saved.
fn call(fields: Value, at: &str) -> Result<Call, FieldError> {
    let call: Call = typed(fields, at)?;
    if call.workflow.is_empty() || call.workflow.len() > 100 {
        return Err(FieldError::new(
            format!("{at}.workflow"),
            "must name a workflow by its slug",
        ));
    }
    Ok(call)
}

fn object_of(fields: Value) -> Map<String, Value> {
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn no_other_field(object: &Map<String, Value>, at: &str, what: &str) -> Result<(), FieldError> {
    match object.keys().next() {
        Some(extra) => Err(FieldError::new(
            format!("{at}.{extra}"),
            format!("is not a field of {what}"),
        )),
        None => Ok(()),
    }
}

/// Every step id in `step` and the lists nested in it that may be read
/// after it (a loop's steps may not).
fn ids(step: &Step) -> Vec<String> {
    let mut all = vec![step.id.clone()];
    if !matches!(step.action, Action::ForEach(_)) {
        all.extend(step.nested().flatten().flat_map(ids));
    } else if let OnError::Steps(handler) = &step.on_error {
        all.extend(handler.iter().flat_map(ids));
    }
    all
}
