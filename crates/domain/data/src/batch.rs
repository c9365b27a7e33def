//! `POST /api/batch` (API.md 13): up to [`OPERATIONS_MAX`] Data API row
//! routes run in order, as the caller, in one transaction. A string that is
//! exactly `{{n.data.<path>}}` in a later body or path segment stands for
//! that value of operation n's answer.

use std::ops::Range;

use permissions::Plane;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::callers::{Caller, DataRequest, Effect};
use crate::error::{DataError, Place, payload_error};
use crate::reads::ListParams;
use crate::service::{DataService, Target, Via};

/// Most operations in one batch.
pub const OPERATIONS_MAX: usize = 100;

/// One operation's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The status the route would have answered.
    pub status: u16,
    /// Its `data`: JSON text (`null` for a delete).
    pub data: String,
}

/// Why a run of the batch failed.
enum Failed {
    /// A merged insert was refused: which operation is to blame is found
    /// by running the batch again one operation at a time.
    Merged(DataError),
    /// An operation run alone was refused: the batch's answer.
    Alone(DataError),
}

impl Failed {
    fn into_error(self) -> DataError {
        match self {
            Failed::Merged(error) | Failed::Alone(error) => error,
        }
    }
}

/// One operation as sent, checked for shape.
#[derive(Debug)]
struct Operation<'b> {
    method: Method,
    /// The path's segments after `/api/data/`: schema, table, maybe a key.
    segments: Vec<&'b str>,
    query: Option<&'b Map<String, Value>>,
    body: Option<&'b Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post,
    Patch,
    Delete,
}

impl DataService {
    /// Runs the operations of `body` (the `data` of the request) as the
    /// bearer's caller in one transaction: every answer, or the first
    /// refusal (`meta.index`) with nothing written.
    pub async fn batch(
        &self,
        request: DataRequest<'_>,
        body: &Value,
    ) -> Result<Vec<Answered>, DataError> {
        let operations = parse(body)?;
        let merged = runs(&operations);
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            // Consecutive inserts into one table run as one statement; when
            // that fails, the batch runs again one operation at a time, so
            // the refusal names its operation.
            if merged.iter().any(|run| run.len() > 1) {
                match self.run_all(caller, v, &operations, &merged).await {
                    Ok(out) => return Ok(out),
                    Err(Failed::Alone(error)) => return Err(error),
                    Err(Failed::Merged(_)) => {}
                }
            }
            let single: Vec<Range<usize>> = (0..operations.len()).map(|i| i..i + 1).collect();
            self.run_all(caller, v, &operations, &single)
                .await
                .map_err(Failed::into_error)
        })
        .await
    }

    /// Runs `operations` in one transaction, each run of `runs` as one
    /// statement (a run of several: inserts into one table, merged).
    async fn run_all(
        &self,
        caller: Caller<'_>,
        version: i64,
        operations: &[Operation<'_>],
        runs: &[Range<usize>],
    ) -> Result<Vec<Answered>, Failed> {
        let txn = Mutex::new(
            self.store
                .begin()
                .await
                .map_err(|e| Failed::Alone(e.into()))?,
        );
        let via = Via::Transaction(&txn);
        let mut answers: Vec<Value> = Vec::with_capacity(operations.len());
        let mut out = Vec::with_capacity(operations.len());
        // The answers share one ceiling (API.md 17).
        let ceiling = self.max_answer_bytes().await.map_err(Failed::Alone)?;
        let mut answered_bytes = 0u64;
        for run in runs {
            let answered = if run.len() == 1 {
                let index = run.start;
                vec![
                    self.run(caller, version, &operations[index], index, &answers, via)
                        .await
                        .map_err(|e| Failed::Alone(e.at(Place::Index(index))))?,
                ]
            } else {
                self.insert_run(caller, version, &operations[run.clone()], &answers, via)
                    .await
                    .map_err(|e| Failed::Merged(e.at(Place::Index(run.start))))?
            };
            for (offset, answer) in answered.into_iter().enumerate() {
                answered_bytes += answer.data.len() as u64;
                if answered_bytes > ceiling {
                    let error = DataError::Store(kernel::StoreError::AnswerTooLarge);
                    return Err(Failed::Alone(error.at(Place::Index(run.start + offset))));
                }
                let data: Value = serde_json::from_str(&answer.data).map_err(|e| {
                    Failed::Alone(DataError::Store(kernel::StoreError::Internal(
                        e.to_string(),
                    )))
                })?;
                answers.push(serde_json::json!({ "data": data }));
                out.push(answer);
            }
        }
        txn.into_inner()
            .commit()
            .await
            .map_err(|e| Failed::Alone(e.into()))?;
        Ok(out)
    }

    /// Inserts the rows of several POSTs into one table in one statement;
    /// answers each operation's part of the rows written.
    async fn insert_run(
        &self,
        caller: Caller<'_>,
        version: i64,
        operations: &[Operation<'_>],
        answers: &[Value],
        via: Via<'_>,
    ) -> Result<Vec<Answered>, DataError> {
        let mut rows = Vec::new();
        let mut parts = Vec::with_capacity(operations.len());
        for operation in operations {
            let data = operation
                .body
                .and_then(|b| b.get("data"))
                .map(|d| substitute(d, answers, "data"))
                .transpose()?
                .unwrap_or(Value::Null);
            match data {
                Value::Array(items) => {
                    parts.push((items.len(), false));
                    rows.extend(items);
                }
                row => {
                    parts.push((1, true));
                    rows.push(row);
                }
            }
        }
        let target = Target::exposed(operations[0].segments[0], operations[0].segments[1]);
        let written = self
            .insert_via(caller, version, target, (&Value::Array(rows), None), via)
            .await?;
        let items = split_array(&written);
        let mut at = 0;
        let mut out = Vec::with_capacity(parts.len());
        for (count, single) in parts {
            let mine = items.get(at..at + count).ok_or_else(|| {
                DataError::Store(kernel::StoreError::Internal(
                    "rows missing from an insert".into(),
                ))
            })?;
            at += count;
            let data = if single {
                mine[0].to_owned()
            } else {
                format!("[{}]", mine.join(","))
            };
            out.push(Answered { status: 201, data });
        }
        Ok(out)
    }

    async fn run(
        &self,
        caller: Caller<'_>,
        version: i64,
        operation: &Operation<'_>,
        index: usize,
        answers: &[Value],
        via: Via<'_>,
    ) -> Result<Answered, DataError> {
        let segments = operation
            .segments
            .iter()
            .map(|s| match reference(s) {
                Some(path) => resolve(path, answers, &format!("[{index}].path")).map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
                None => Ok((*s).to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let target = Target::exposed(&segments[0], &segments[1]);
        let text = |name: &str| -> Option<String> {
            operation
                .query
                .and_then(|q| q.get(name))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let data = || -> Result<Value, DataError> {
            let body = operation
                .body
                .and_then(|b| b.get("data"))
                .ok_or_else(|| payload_error(format!("[{index}].body.data"), "is required"))?;
            substitute(body, answers, &format!("[{index}].body.data"))
        };
        let answered = |status: u16, data: String| Answered { status, data };
        Ok(match (operation.method, segments.get(2)) {
            (Method::Get, None) => {
                let params = ListParams {
                    select: text("select"),
                    filter: text("filter"),
                    sort: text("sort"),
                    limit: text("limit"),
                    offset: text("offset"),
                    count: text("count"),
                    aggregate: text("aggregate"),
                    group_by: text("groupBy"),
                };
                let page = self.list_via(caller, version, target, &params, via).await?;
                answered(200, page.rows)
            }
            (Method::Get, Some(key)) => {
                let select = text("select");
                let row = self
                    .get_via(caller, version, target, (key, select.as_deref()), via)
                    .await?;
                answered(200, row)
            }
            (Method::Post, None) => {
                let conflict = text("onConflict");
                let rows = self
                    .insert_via(
                        caller,
                        version,
                        target,
                        (&data()?, conflict.as_deref()),
                        via,
                    )
                    .await?;
                answered(201, rows)
            }
            (Method::Patch, Some(key)) => {
                let row = self
                    .update_via(caller, version, target, (key, &data()?), via)
                    .await?;
                answered(200, row)
            }
            (Method::Delete, Some(key)) => {
                self.delete_via(caller, version, target, key, via).await?;
                answered(204, "null".to_owned())
            }
            // Refused when parsed.
            _ => {
                return Err(payload_error(
                    format!("[{index}].method"),
                    "is not a method of this path",
                ));
            }
        })
    }
}

/// The operations of a batch, each a Data API row route, every reference
/// to an earlier operation.
fn parse(body: &Value) -> Result<Vec<Operation<'_>>, DataError> {
    let items = body
        .as_array()
        .ok_or_else(|| payload_error("data", "must be an array of operations"))?;
    if items.is_empty() || items.len() > OPERATIONS_MAX {
        return Err(payload_error(
            "data",
            format!("must hold 1 to {OPERATIONS_MAX} operations"),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let at = |name: &str| format!("[{index}].{name}");
            let object = item
                .as_object()
                .ok_or_else(|| payload_error(format!("[{index}]"), "must be an object"))?;
            let path = object
                .get("path")
                .and_then(Value::as_str)
                .ok_or_else(|| payload_error(at("path"), "must be a string"))?;
            let segments: Vec<&str> = path
                .strip_prefix("/api/data/")
                .map(|rest| rest.split('/').collect())
                .filter(|s: &Vec<&str>| {
                    (2..=3).contains(&s.len()) && s.iter().all(|p| !p.is_empty())
                })
                .ok_or_else(|| {
                    payload_error(
                        at("path"),
                        "must be a Data API row route: /api/data/{schema}/{table}[/{pk}]",
                    )
                })?;
            for segment in &segments {
                if let Some(path) = reference(segment) {
                    check_reference(path, index, &at("path"))?;
                }
            }
            let method = match object.get("method").and_then(Value::as_str) {
                Some("GET") => Method::Get,
                Some("POST") if segments.len() == 2 => Method::Post,
                Some("PATCH") if segments.len() == 3 => Method::Patch,
                Some("DELETE") if segments.len() == 3 => Method::Delete,
                _ => {
                    return Err(payload_error(
                        at("method"),
                        "must be GET or POST on a table, GET, PATCH or DELETE on a row",
                    ));
                }
            };
            let query = match object.get("query") {
                None | Some(Value::Null) => None,
                Some(Value::Object(query)) if query.values().all(Value::is_string) => Some(query),
                Some(_) => {
                    return Err(payload_error(
                        at("query"),
                        "must be an object of string values",
                    ));
                }
            };
            let body = object.get("body").filter(|b| !b.is_null());
            if let Some(body) = body {
                references_in(body, index, &at("body"))?;
            }
            Ok(Operation {
                method,
                segments,
                query,
                body,
            })
        })
        .collect()
}

/// The runs of operations that can run as one statement: consecutive POSTs
/// to the same table, without `onConflict`, each inserting a row or a
/// non-empty array of rows, none referring to another of its run.
fn runs(operations: &[Operation<'_>]) -> Vec<Range<usize>> {
    let mergeable = |operation: &Operation<'_>| {
        operation.method == Method::Post
            && operation
                .query
                .is_none_or(|q| !q.contains_key("onConflict"))
            && operation.segments.iter().all(|s| reference(s).is_none())
            && match operation.body.and_then(|b| b.get("data")) {
                Some(Value::Object(_)) => true,
                Some(Value::Array(items)) => {
                    !items.is_empty() && items.iter().all(Value::is_object)
                }
                _ => false,
            }
    };
    let mut out: Vec<Range<usize>> = Vec::new();
    for (index, operation) in operations.iter().enumerate() {
        if let Some(last) = out.last_mut()
            && last.end == index
            && mergeable(operation)
            && mergeable(&operations[last.start])
            && operations[last.start].segments == operation.segments
            && operation
                .body
                .is_none_or(|body| !refers_to(body, last.start))
        {
            last.end += 1;
        } else {
            out.push(index..index + 1);
        }
    }
    out
}

/// Whether `value` refers to an operation from `first` on.
fn refers_to(value: &Value, first: usize) -> bool {
    match value {
        Value::String(s) => reference(s)
            .and_then(|path| path.split('.').next())
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n >= first),
        Value::Array(items) => items.iter().any(|v| refers_to(v, first)),
        Value::Object(map) => map.values().any(|v| refers_to(v, first)),
        _ => false,
    }
}

/// The items of a compact JSON array's text, as texts.
fn split_array(text: &str) -> Vec<&str> {
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or("");
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    let (mut in_string, mut escaped) = (false, false);
    for (at, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            _ if in_string => {}
            '{' | '[' => depth += 1,
            '}' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if !inner.trim().is_empty() {
        items.push(&inner[start..]);
    }
    items
}

/// `n.data.<path>` of a string that is exactly `{{n.data.<path>}}`.
fn reference(text: &str) -> Option<&str> {
    text.strip_prefix("{{")?.strip_suffix("}}").map(str::trim)
}

/// Refuses a reference to the operation itself, a later one or none.
fn check_reference(path: &str, index: usize, field: &str) -> Result<(), DataError> {
    let mut parts = path.split('.');
    let earlier = parts
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| n < index);
    if earlier && parts.next() == Some("data") {
        Ok(())
    } else {
        Err(payload_error(
            field.to_owned(),
            format!("{{{{{path}}}}} must be {{{{n.data...}}}} of an earlier operation"),
        ))
    }
}

fn references_in(value: &Value, index: usize, field: &str) -> Result<(), DataError> {
    match value {
        Value::String(s) => match reference(s) {
            Some(path) => check_reference(path, index, field),
            None => Ok(()),
        },
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| references_in(v, index, &format!("{field}[{i}]"))),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| references_in(v, index, &format!("{field}.{k}"))),
        _ => Ok(()),
    }
}

/// The value at `n.data.<path>` of the answers so far.
fn resolve<'a>(path: &str, answers: &'a [Value], field: &str) -> Result<&'a Value, DataError> {
    let mut parts = path.split('.');
    let mut at = parts
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| answers.get(n));
    for part in parts {
        at = at.and_then(|value| match value {
            Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            other => other.get(part),
        });
    }
    at.ok_or_else(|| payload_error(field.to_owned(), format!("{{{{{path}}}}} names no value")))
}

/// `value` with every reference replaced by what it names, keeping its type.
fn substitute(value: &Value, answers: &[Value], field: &str) -> Result<Value, DataError> {
    Ok(match value {
        Value::String(s) => match reference(s) {
            Some(path) => resolve(path, answers, field)?.clone(),
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| substitute(v, answers, &format!("{field}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), substitute(v, answers, &format!("{field}.{k}"))?)))
                .collect::<Result<_, DataError>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(body: Value) -> String {
        match parse(&body) {
            Err(DataError::Payload(e)) => e.field.to_string(),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn operations_are_row_routes_referring_back() {
        assert_eq!(refused(json!([])), "data");
        assert_eq!(
            refused(json!([{ "method": "GET", "path": "/admin/api/users" }])),
            "[0].path"
        );
        assert_eq!(
            refused(json!([{ "method": "PUT", "path": "/api/data/app/t" }])),
            "[0].method"
        );
        assert_eq!(
            refused(json!([{ "method": "PATCH", "path": "/api/data/app/t" }])),
            "[0].method"
        );
        assert_eq!(
            refused(json!([{ "method": "GET", "path": "/api/data/app/t/{{0.data.id}}" }])),
            "[0].path"
        );
        assert_eq!(
            refused(json!([{ "method": "GET", "path": "/api/data/app/t" },
                { "method": "POST", "path": "/api/data/app/t", "body": { "data": { "a": ["{{2.data.id}}"] } } }])),
            "[1].body.data.a[0]"
        );
        assert_eq!(
            refused(
                json!([{ "method": "GET", "path": "/api/data/app/t", "query": { "limit": 5 } }])
            ),
            "[0].query"
        );
        let many: Vec<Value> = (0..101)
            .map(|_| json!({ "method": "GET", "path": "/api/data/a/b" }))
            .collect();
        assert_eq!(refused(Value::Array(many)), "data");
        assert!(
            parse(
                &json!([{ "method": "POST", "path": "/api/data/app/t", "body": { "data": {} } },
            { "method": "DELETE", "path": "/api/data/app/t/{{0.data.id}}" }])
            )
            .is_ok()
        );
    }

    #[test]
    fn consecutive_inserts_into_one_table_run_together() {
        let body = json!([
            { "method": "POST", "path": "/api/data/app/a", "body": { "data": { "x": 1 } } },
            { "method": "POST", "path": "/api/data/app/a", "body": { "data": [{ "x": 2 }, { "x": 3 }] } },
            { "method": "POST", "path": "/api/data/app/a", "body": { "data": { "x": "{{1.data.0.x}}" } } },
            { "method": "POST", "path": "/api/data/app/b", "body": { "data": { "x": "{{0.data.x}}" } } },
            { "method": "POST", "path": "/api/data/app/b", "body": { "data": [] } },
            { "method": "POST", "path": "/api/data/app/b", "query": { "onConflict": "x" }, "body": { "data": {} } },
            { "method": "GET", "path": "/api/data/app/b" }
        ]);
        let operations = parse(&body).unwrap();
        assert_eq!(runs(&operations), vec![0..2, 2..3, 3..4, 4..5, 5..6, 6..7]);
        assert_eq!(
            split_array(r#"[{"a":"x,]\"}"},[1,2],3]"#),
            vec![r#"{"a":"x,]\"}"}"#, "[1,2]", "3"]
        );
        assert!(split_array("[]").is_empty());
    }

    #[test]
    fn references_keep_their_json_type() {
        let answers = vec![json!({ "data": { "id": 7, "tags": ["a"], "none": null } })];
        let body = json!({ "order_id": "{{0.data.id}}", "tag": "{{ 0.data.tags.0 }}", "n": "{{0.data.none}}", "x": "{{0.data}}x" });
        let out = substitute(&body, &answers, "data").unwrap();
        assert_eq!(
            out,
            json!({ "order_id": 7, "tag": "a", "n": null, "x": "{{0.data}}x" })
        );
        assert!(substitute(&json!("{{0.data.missing}}"), &answers, "data").is_err());
    }
}
