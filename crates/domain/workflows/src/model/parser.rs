//! The walk over step lists: unique ids, the nesting and step-count
//! limits, and templates that name only steps running before.

use std::collections::HashSet;

use kernel::FieldError;
use kernel::filter::Filter;
use serde_json::{Map, Value};

use super::steps::{Action, Condition, Delay, Delete, Fail, Http, Insert, Query, Step, Update};
use super::{DEPTH_MAX, STEPS_MAX, check_templates, typed};

/// Parses step lists, tracking the ids seen and the ids that run before
/// the step being parsed.
#[derive(Default)]
pub(crate) struct StepParser {
    all: HashSet<String>,
    count: usize,
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
            Some("condition") => Action::Condition(self.condition(fields, at, &id, depth, before)?),
            Some("query") => Action::Query(Query::parse(fields, at)?),
            Some("insert") => Action::Insert(Insert::parse(fields, at)?),
            Some("update") => Action::Update(Update::parse(fields, at)?),
            Some("delete") => Action::Delete(Delete::parse(fields, at)?),
            Some("http") => Action::Http(Http::parse(fields, at)?),
            Some("delay") => Action::Delay(Delay::parse(fields, at)?),
            Some("finish") => Action::Finish(typed(fields, at)?),
            Some("fail") => Action::Fail(Fail::parse(fields, at)?),
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

    /// A condition step: its test and both branches, parsed one level deeper.
    fn condition(
        &mut self,
        fields: Value,
        at: &str,
        id: &str,
        depth: usize,
        before: &[String],
    ) -> Result<Condition, FieldError> {
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
        if let Some(extra) = object.keys().next() {
            return Err(FieldError::new(
                format!("{at}.{extra}"),
                "is not a field of a condition step",
            ));
        }
        Ok(Condition {
            test,
            then,
            otherwise,
        })
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
