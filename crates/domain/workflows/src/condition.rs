//! A condition step's test: the filter language of the Data API with context
//! paths as keys, evaluated in memory.

use std::cmp::Ordering;

use chrono::{DateTime, Datelike, Duration, NaiveTime, Utc};
use kernel::FieldError;
use kernel::filter::{Filter, Op, Operand};
use serde_json::Value;

use crate::template::{self, Context};

/// Whether `test` (rendered against `context` first) holds. `$USER.*` reads
/// `context.user`; `$PERIOD.*` is cut in UTC.
pub fn holds<C: Context + ?Sized>(
    test: &Value,
    context: &C,
    now: DateTime<Utc>,
) -> Result<bool, FieldError> {
    let filter = Filter::parse(&template::render(test, context), "if")?;
    Ok(eval(&filter, context, now))
}

fn eval<C: Context + ?Sized>(filter: &Filter, context: &C, now: DateTime<Utc>) -> bool {
    match filter {
        Filter::And(items) => items.iter().all(|f| eval(f, context, now)),
        Filter::Or(items) => items.iter().any(|f| eval(f, context, now)),
        Filter::Not(inner) => !eval(inner, context, now),
        Filter::Condition {
            column,
            op,
            operand,
        } => {
            let left = context.value_at(column).unwrap_or(&Value::Null);
            compare(left, *op, operand, context, now)
        }
    }
}

fn value_of<C: Context + ?Sized>(operand: &Operand, context: &C, now: DateTime<Utc>) -> Value {
    match operand {
        Operand::Literal(v) => v.clone(),
        Operand::User(column) => context
            .value_at("user")
            .and_then(|user| user.get(column.as_str()))
            .cloned()
            .unwrap_or(Value::Null),
        Operand::Period(name) => Value::String(period(name, now).to_rfc3339()),
        Operand::List(items) => {
            Value::Array(items.iter().map(|i| value_of(i, context, now)).collect())
        }
    }
}

fn period(name: &str, now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive().and_time(NaiveTime::MIN).and_utc();
    match name {
        "today" => today,
        "yesterday" => today - Duration::days(1),
        "tomorrow" => today + Duration::days(1),
        "startOfWeek" => today - Duration::days(i64::from(now.weekday().num_days_from_monday())),
        "startOfMonth" => today - Duration::days(i64::from(now.day0())),
        "startOfYear" => today - Duration::days(i64::from(now.ordinal0())),
        _ => now,
    }
}

fn order(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

fn equal(left: &Value, right: &Value) -> bool {
    order(left, right).map_or(left == right, Ordering::is_eq)
}

fn compare<C: Context + ?Sized>(
    left: &Value,
    op: Op,
    operand: &Operand,
    context: &C,
    now: DateTime<Utc>,
) -> bool {
    let right = value_of(operand, context, now);
    match op {
        Op::IsNull => right.as_bool() == Some(left.is_null()),
        Op::Eq => equal(left, &right),
        Op::Neq => !left.is_null() && !equal(left, &right),
        Op::Gt => order(left, &right).is_some_and(Ordering::is_gt),
        Op::Gte => order(left, &right).is_some_and(Ordering::is_ge),
        Op::Lt => order(left, &right).is_some_and(Ordering::is_lt),
        Op::Lte => order(left, &right).is_some_and(Ordering::is_le),
        Op::In => right
            .as_array()
            .is_some_and(|items| items.iter().any(|i| equal(left, i))),
        Op::Nin => {
            !left.is_null()
                && right
                    .as_array()
                    .is_some_and(|items| !items.iter().any(|i| equal(left, i)))
        }
        Op::Like | Op::Ilike => match (left.as_str(), right.as_str()) {
            (Some(text), Some(pattern)) if op == Op::Like => like(text.chars(), pattern.chars()),
            (Some(text), Some(pattern)) => {
                like(text.to_lowercase().chars(), pattern.to_lowercase().chars())
            }
            _ => false,
        },
        Op::Search => match (left.as_str(), right.as_str()) {
            (Some(text), Some(query)) => search(text, query),
            _ => false,
        },
    }
}

/// Words as PostgreSQL's `simple` configuration makes them: lower-cased
/// runs of letters and digits.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Web search syntax over `text`, as `websearch_to_tsquery('simple', query)`
/// reads it: words all present, `"a phrase"` as consecutive words, `-word`
/// absent, `or` between alternatives.
fn search(text: &str, query: &str) -> bool {
    let have = words(text);
    let contains =
        |phrase: &[String]| !phrase.is_empty() && have.windows(phrase.len()).any(|w| w == phrase);
    // Alternatives separated by `or`, each a conjunction of terms.
    let mut alternatives: Vec<Vec<(bool, Vec<String>)>> = vec![Vec::new()];
    let mut rest = query;
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        rest = &rest[start..];
        let negated = rest.starts_with('-');
        if negated {
            rest = &rest[1..];
        }
        let (term, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => rest.split_once(char::is_whitespace).unwrap_or((rest, "")),
        };
        rest = after;
        if !negated && term.eq_ignore_ascii_case("or") {
            alternatives.push(Vec::new());
            continue;
        }
        let phrase = words(term);
        if let Some(last) = alternatives.last_mut()
            && !phrase.is_empty()
        {
            last.push((negated, phrase));
        }
    }
    let alternatives: Vec<_> = alternatives.into_iter().filter(|a| !a.is_empty()).collect();
    !alternatives.is_empty()
        && alternatives.iter().any(|terms| {
            terms
                .iter()
                .all(|(negated, phrase)| contains(phrase) != *negated)
        })
}

/// SQL LIKE: `%` any run, `_` one character, `\` escapes.
fn like(text: impl Iterator<Item = char>, pattern: impl Iterator<Item = char>) -> bool {
    let text: Vec<char> = text.collect();
    let pattern: Vec<char> = pattern.collect();
    // Positions in the text each prefix of the pattern can end at.
    let mut reach = vec![false; text.len() + 1];
    reach[0] = true;
    let mut i = 0;
    while i < pattern.len() {
        let (token, literal) = match pattern[i] {
            '\\' if i + 1 < pattern.len() => {
                i += 1;
                (pattern[i], true)
            }
            c => (c, false),
        };
        let mut next = vec![false; text.len() + 1];
        for at in 0..=text.len() {
            if !reach[at] {
                continue;
            }
            match token {
                '%' if !literal => next[at..].iter_mut().for_each(|n| *n = true),
                '_' if !literal => {
                    if at < text.len() {
                        next[at + 1] = true;
                    }
                }
                c => {
                    if text.get(at) == Some(&c) {
                        next[at + 1] = true;
                    }
                }
            }
        }
        reach = next;
        i += 1;
    }
    reach[text.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(test: Value) -> bool {
        let ctx = json!({
            "start": { "data": { "body": { "amount": 150, "name": "Order 7", "tag": null, "kind": "b" },
                                 "meta": { "headers": { "x-secret": "s3" } } } },
            "user": { "id": "u1" }
        });
        holds(&test, &ctx, Utc::now()).unwrap()
    }

    #[test]
    fn evaluates_the_filter_language_over_the_context() {
        assert!(check(json!({ "start.data.body.amount": { "gt": 100 } })));
        assert!(!check(json!({ "start.data.body.amount": { "gt": 150.0 } })));
        assert!(check(json!({ "start.data.body.amount": { "eq": 150.0 } })));
        assert!(check(
            json!({ "start.data.meta.headers.x-secret": { "eq": "s3" } })
        ));
        assert!(check(json!({ "start.data.body.tag": { "isNull": true } })));
        assert!(check(
            json!({ "start.data.body.missing": { "isNull": true } })
        ));
        assert!(check(
            json!({ "start.data.body.kind": { "in": ["a", "b"] } })
        ));
        assert!(check(
            json!({ "not": { "start.data.body.kind": { "nin": ["a", "b"] } } })
        ));
        assert!(check(
            json!({ "start.data.body.name": { "like": "Order _" } })
        ));
        assert!(check(
            json!({ "start.data.body.name": { "ilike": "%order%" } })
        ));
        assert!(!check(
            json!({ "start.data.body.name": { "like": "order%" } })
        ));
        assert!(check(
            json!({ "or": [ { "start.data.body.amount": { "lt": 0 } }, { "user.id": { "eq": "$USER.id" } } ] })
        ));
        assert!(check(
            json!({ "start.data.body.amount": { "eq": "{{start.data.body.amount}}" } })
        ));
        assert!(!check(json!({ "start.data.body.amount": { "gt": "100" } })));
    }

    #[test]
    fn search_reads_web_search_syntax() {
        let body = "Rust makes a fast web server; Java too";
        assert!(search(body, "rust"));
        assert!(search(body, "RUST server"));
        assert!(search(body, "\"web server\""));
        assert!(!search(body, "\"server web\""));
        assert!(!search(body, "rust -java"));
        assert!(search(body, "python or rust"));
        assert!(!search(body, "python or go"));
        assert!(!search(body, ""));
    }

    #[test]
    fn like_matches_as_sql_does() {
        let m = |t: &str, p: &str| like(t.chars(), p.chars());
        assert!(m("abc", "a%"));
        assert!(m("abc", "%c"));
        assert!(m("abc", "a_c"));
        assert!(!m("abc", "a_"));
        assert!(m("a%c", "a\\%c"));
        assert!(!m("abc", "a\\%c"));
        assert!(m("", "%"));
    }
}
