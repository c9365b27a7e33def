//! The filter language shared by the Data API's `filter` parameter and grant
//! row filters: `{ "and": [..] }`, `{ "or": [..] }`, `{ "not": f }` and
//! `{ "<column>": { "<op>": value } }` (`search` matches words with
//! PostgreSQL's web search syntax). Values may be `$USER.<column>` or
//! `$PERIOD.<name>` variables, resolved when a query is built.

use serde_json::{Map, Value};

use crate::error::FieldError;

/// Deepest nesting of and/or/not.
const DEPTH_MAX: usize = 16;
/// Most conditions in one filter.
const NODES_MAX: usize = 200;
/// Longest `in`/`nin` list.
const LIST_MAX: usize = 1000;
/// Names `$PERIOD.` accepts.
pub const PERIODS: [&str; 7] = [
    "now",
    "today",
    "yesterday",
    "tomorrow",
    "startOfWeek",
    "startOfMonth",
    "startOfYear",
];

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `<>`
    Neq,
    /// `>`
    Gt,
    /// `>=`
    Gte,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `IN (..)`
    In,
    /// `NOT IN (..)`
    Nin,
    /// `LIKE`
    Like,
    /// `ILIKE`
    Ilike,
    /// `IS NULL` (true) or `IS NOT NULL` (false)
    IsNull,
    /// Full-text match: `to_tsvector('simple', column) @@
    /// websearch_to_tsquery('simple', value)`.
    Search,
}

impl Op {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "eq" => Op::Eq,
            "neq" => Op::Neq,
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "in" => Op::In,
            "nin" => Op::Nin,
            "like" => Op::Like,
            "ilike" => Op::Ilike,
            "isNull" => Op::IsNull,
            "search" => Op::Search,
            _ => return None,
        })
    }
}

/// A value to compare with.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A JSON literal, bound as a parameter.
    Literal(Value),
    /// `$USER.<column>`: the caller's (or token owner's) user row.
    User(String),
    /// `$PERIOD.<name>`: an instant cut in the caller's time zone.
    Period(&'static str),
    /// The items of an `in`/`nin` list.
    List(Vec<Operand>),
}

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// All must hold.
    And(Vec<Filter>),
    /// One must hold.
    Or(Vec<Filter>),
    /// Must not hold.
    Not(Box<Filter>),
    /// `column op operand`.
    Condition {
        /// Column name, as in the table.
        column: String,
        /// Operator.
        op: Op,
        /// Right-hand side.
        operand: Operand,
    },
}

impl Filter {
    /// Parses a filter; errors name the offending path under `field`.
    pub fn parse(value: &Value, field: &str) -> Result<Self, FieldError> {
        let mut nodes = 0;
        parse(value, field, 0, &mut nodes)
    }

    /// Every column the filter names.
    pub fn columns(&self) -> Vec<&str> {
        match self {
            Filter::And(items) | Filter::Or(items) => {
                items.iter().flat_map(Filter::columns).collect()
            }
            Filter::Not(inner) => inner.columns(),
            Filter::Condition { column, .. } => vec![column.as_str()],
        }
    }

    /// Whether some operand satisfies `test` (a `$USER` or `$PERIOD` variable, say).
    pub fn mentions(&self, test: &impl Fn(&Operand) -> bool) -> bool {
        fn within(operand: &Operand, test: &impl Fn(&Operand) -> bool) -> bool {
            match operand {
                Operand::List(items) => items.iter().any(|item| within(item, test)),
                other => test(other),
            }
        }
        match self {
            Filter::And(items) | Filter::Or(items) => items.iter().any(|f| f.mentions(test)),
            Filter::Not(inner) => inner.mentions(test),
            Filter::Condition { operand, .. } => within(operand, test),
        }
    }
}

fn operand(value: &Value, path: &str) -> Result<Operand, FieldError> {
    match value {
        Value::String(s) if s.starts_with("$USER.") => {
            let column = &s["$USER.".len()..];
            if column.is_empty()
                || column.len() > 63
                || !column
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(FieldError::new(
                    path.to_owned(),
                    "names no column of the user",
                ));
            }
            Ok(Operand::User(column.to_owned()))
        }
        Value::String(s) if s.starts_with("$PERIOD.") => PERIODS
            .iter()
            .find(|p| **p == &s["$PERIOD.".len()..])
            .map(|p| Operand::Period(p))
            .ok_or_else(|| {
                FieldError::new(
                    path.to_owned(),
                    format!("is not one of $PERIOD.{}", PERIODS.join(", $PERIOD.")),
                )
            }),
        Value::Array(_) | Value::Object(_) => {
            Err(FieldError::new(path.to_owned(), "must be a single value"))
        }
        other => Ok(Operand::Literal(other.clone())),
    }
}

fn condition(
    column: &str,
    ops: &Map<String, Value>,
    path: &str,
) -> Result<Vec<Filter>, FieldError> {
    if ops.is_empty() {
        return Err(FieldError::new(path.to_owned(), "needs an operator"));
    }
    let mut conditions = Vec::with_capacity(ops.len());
    for (name, value) in ops {
        let at = format!("{path}.{name}");
        let op = Op::parse(name).ok_or_else(|| {
            FieldError::new(
                at.clone(),
                "is not an operator (eq, neq, gt, gte, lt, lte, in, nin, like, ilike, isNull, search)",
            )
        })?;
        let operand = match op {
            Op::In | Op::Nin => {
                let items = value
                    .as_array()
                    .ok_or_else(|| FieldError::new(at.clone(), "must be an array"))?;
                if items.len() > LIST_MAX {
                    return Err(FieldError::new(
                        at,
                        format!("must have at most {LIST_MAX} items"),
                    ));
                }
                Operand::List(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| operand(v, &format!("{at}[{i}]")))
                        .collect::<Result<_, _>>()?,
                )
            }
            Op::IsNull if !value.is_boolean() => {
                return Err(FieldError::new(at, "must be true or false"));
            }
            Op::Like | Op::Ilike if !value.is_string() => {
                return Err(FieldError::new(at, "must be a string pattern"));
            }
            Op::Search if !value.is_string() => {
                return Err(FieldError::new(at, "must be a string of search terms"));
            }
            _ => operand(value, &at)?,
        };
        conditions.push(Filter::Condition {
            column: column.to_owned(),
            op,
            operand,
        });
    }
    Ok(conditions)
}

fn parse(value: &Value, path: &str, depth: usize, nodes: &mut usize) -> Result<Filter, FieldError> {
    if depth > DEPTH_MAX {
        return Err(FieldError::new(path.to_owned(), "is nested too deeply"));
    }
    *nodes += 1;
    if *nodes > NODES_MAX {
        return Err(FieldError::new(path.to_owned(), "has too many conditions"));
    }
    let object = value
        .as_object()
        .ok_or_else(|| FieldError::new(path.to_owned(), "must be an object"))?;
    let mut parts = Vec::with_capacity(object.len());
    for (key, inner) in object {
        let at = format!("{path}.{key}");
        match key.as_str() {
            "and" | "or" => {
                let items = inner
                    .as_array()
                    .ok_or_else(|| FieldError::new(at.clone(), "must be an array"))?;
                let parsed = items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| parse(f, &format!("{at}[{i}]"), depth + 1, nodes))
                    .collect::<Result<Vec<_>, _>>()?;
                parts.push(if key == "and" {
                    Filter::And(parsed)
                } else {
                    Filter::Or(parsed)
                });
            }
            "not" => parts.push(Filter::Not(Box::new(parse(inner, &at, depth + 1, nodes)?))),
            column => {
                let ops = inner
                    .as_object()
                    .ok_or_else(|| FieldError::new(at.clone(), "must be an object of operators"))?;
                parts.extend(condition(column, ops, &at)?);
            }
        }
    }
    Ok(if parts.len() == 1 {
        parts.remove(0)
    } else {
        Filter::And(parts)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_the_language() {
        let f = Filter::parse(&json!({ "and": [ { "owner_id": { "eq": "$USER.id" } }, { "or": [ { "amount": { "gt": 5, "lte": 10 } }, { "not": { "status": { "in": ["a", "b"] } } } ] } ] }), "filter").unwrap();
        assert_eq!(f.columns(), ["owner_id", "amount", "amount", "status"]);
        let day = Filter::parse(
            &json!({ "created_at": { "gte": "$PERIOD.today" } }),
            "filter",
        )
        .unwrap();
        assert_eq!(
            day,
            Filter::Condition {
                column: "created_at".into(),
                op: Op::Gte,
                operand: Operand::Period("today")
            }
        );
    }

    #[test]
    fn refuses_bad_filters() {
        for (bad, field) in [
            (json!([]), "filter"),
            (json!({ "a": 1 }), "filter.a"),
            (json!({ "a": { "between": 1 } }), "filter.a.between"),
            (json!({ "a": { "in": 1 } }), "filter.a.in"),
            (json!({ "a": { "eq": "$PERIOD.later" } }), "filter.a.eq"),
            (json!({ "a": { "eq": "$USER.x;y" } }), "filter.a.eq"),
            (json!({ "a": { "isNull": 1 } }), "filter.a.isNull"),
            (json!({ "a": {} }), "filter.a"),
            (
                json!({ "and": [ { "a": { "eq": [1] } } ] }),
                "filter.and[0].a.eq",
            ),
        ] {
            assert_eq!(
                Filter::parse(&bad, "filter").unwrap_err().field,
                field,
                "{bad}"
            );
        }
        let mut deep = json!({ "a": { "eq": 1 } });
        for _ in 0..20 {
            deep = json!({ "not": deep });
        }
        assert!(Filter::parse(&deep, "filter").is_err());
        let long: Vec<_> = (0..1001).collect();
        assert!(Filter::parse(&json!({ "a": { "in": long } }), "filter").is_err());
    }

    /// Any JSON at all: the parser answers a filter or an error, never
    /// panics, and stays within its depth and size limits.
    mod fuzz {
        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::Filter;

        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(
                    |f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
                ),
                "[$a-zA-Z0-9_.;'\" -]{0,12}".prop_map(Value::String),
                prop::sample::select(vec![
                    "$USER.id",
                    "$USER.email",
                    "$PERIOD.today",
                    "$PERIOD.x",
                    "$USER."
                ])
                .prop_map(|s| Value::String(s.to_owned())),
            ];
            leaf.prop_recursive(6, 64, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(
                        prop::sample::select(vec![
                            "and", "or", "not", "eq", "neq", "gt", "gte", "lt", "lte", "in", "nin",
                            "like", "ilike", "isNull", "title", "a", "b", "",
                        ])
                        .prop_map(str::to_owned),
                        inner,
                        0..4,
                    )
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn never_panics(value in json()) {
                if let Ok(filter) = Filter::parse(&value, "filter") {
                    // What parsed names only columns that came from the input.
                    for column in filter.columns() {
                        prop_assert!(value.to_string().contains(column));
                    }
                }
            }
        }
    }
}
