//! `aggregate=alias:fn(column),...` with `groupBy=col,...` on the list
//! route (API.md 13): checked against the table and the caller's grants.

use permissions::Access;

use crate::checks::{masked, readable};
use crate::error::{DataError, query_error};
use crate::query::{Aggregate, Function, Output};
use crate::table::{Kind, Table};

/// Most aggregates in one request.
const AGGREGATES_MAX: usize = 20;

/// The aggregates of `raw`, each on a column `access` reads.
pub(crate) fn aggregates<'t>(
    table: &'t Table,
    access: &Access<'t>,
    raw: &'t str,
) -> Result<Vec<Aggregate<'t>>, DataError> {
    let mut out: Vec<Aggregate<'t>> = Vec::new();
    for part in raw.split(',').map(str::trim) {
        let bad = |why: &str| query_error("aggregate", format!("{part}: {why}"));
        let (alias, call) = part
            .split_once(':')
            .ok_or_else(|| bad("an aggregate is alias:fn(column)"))?;
        let (name, argument) = call
            .strip_suffix(')')
            .and_then(|c| c.split_once('('))
            .ok_or_else(|| bad("an aggregate is alias:fn(column)"))?;
        if alias.is_empty()
            || alias.len() > 63
            || !alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(bad("an alias is letters, digits and _"));
        }
        if out.iter().any(|a| a.alias == alias) {
            return Err(bad("the alias is used twice"));
        }
        let function = match name.trim() {
            "count" => Function::Count,
            "sum" => Function::Sum,
            "avg" => Function::Avg,
            "min" => Function::Min,
            "max" => Function::Max,
            _ => return Err(bad("the function is one of count, sum, avg, min, max")),
        };
        let argument = argument.trim();
        let column = match (function, argument) {
            (Function::Count, "") => None,
            (_, "") => return Err(bad("names no column")),
            (_, name) => Some(readable(table, access, name, "aggregate")?),
        };
        if let Some(column) = column {
            let fits = match function {
                Function::Count => true,
                Function::Sum | Function::Avg => {
                    matches!(column.kind, Kind::Integer | Kind::Number)
                }
                Function::Min | Function::Max => matches!(
                    column.kind,
                    Kind::Integer
                        | Kind::Number
                        | Kind::Text
                        | Kind::Date
                        | Kind::Timestamp
                        | Kind::TimestampTz
                ),
            };
            if !fits {
                return Err(bad(&format!(
                    "{} does not apply to {}",
                    function.sql(),
                    column.name
                )));
            }
        }
        out.push(Aggregate {
            alias,
            function,
            column: column.map(|c| masked(access, c)),
        });
        if out.len() > AGGREGATES_MAX {
            return Err(query_error(
                "aggregate",
                format!("takes at most {AGGREGATES_MAX} aggregates"),
            ));
        }
    }
    Ok(out)
}

/// The `groupBy` columns, each readable, as the caller sees them.
pub(crate) fn group_by<'t>(
    table: &'t Table,
    access: &Access<'t>,
    raw: Option<&str>,
    aggregates: &[Aggregate<'_>],
) -> Result<Vec<Output<'t>>, DataError> {
    let mut out: Vec<Output<'t>> = Vec::new();
    for name in raw.into_iter().flat_map(|r| r.split(',')).map(str::trim) {
        let column = readable(table, access, name, "groupBy")?;
        if !column.kind.is_comparable() {
            return Err(query_error("groupBy", format!("{name} cannot be grouped")));
        }
        if aggregates.iter().any(|a| a.alias == name) {
            return Err(query_error(
                "aggregate",
                format!("{name} is a groupBy column and an alias"),
            ));
        }
        if !out.iter().any(|o| o.column.name == name) {
            out.push(masked(access, column));
        }
    }
    Ok(out)
}

/// `sort` of an aggregate read: the answer's keys; the group columns are
/// appended so pages are stable.
pub(crate) fn sort<'q>(
    raw: Option<&'q str>,
    group_by: &[Output<'q>],
    aggregates: &[Aggregate<'q>],
) -> Result<Vec<(&'q str, bool)>, DataError> {
    let known = |name: &str| -> Option<&'q str> {
        group_by
            .iter()
            .map(|o| o.column.name.as_str())
            .chain(aggregates.iter().map(|a| a.alias))
            .find(|k| *k == name)
    };
    let mut keys: Vec<(&'q str, bool)> = Vec::new();
    for part in raw.into_iter().flat_map(|r| r.split(',')).map(str::trim) {
        let (name, descending) = match part.strip_prefix('-') {
            Some(name) => (name, true),
            None => (part, false),
        };
        let key = known(name).ok_or_else(|| {
            query_error(
                "sort",
                format!("{name} is neither a groupBy column nor an aggregate"),
            )
        })?;
        if !keys.iter().any(|(k, _)| *k == key) {
            keys.push((key, descending));
        }
    }
    for output in group_by {
        if !keys.iter().any(|(k, _)| *k == output.column.name) {
            keys.push((&output.column.name, false));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::table::Column;

    fn table() -> Table {
        Table {
            resource_id: uuid::Uuid::nil(),
            schema: "app".into(),
            name: "orders".into(),
            exposed_methods: vec!["GET".into()],
            columns: vec![
                Column::plain("id", "bigint", Kind::Integer, true),
                Column::plain("status", "text", Kind::Text, true),
                Column::plain("total", "numeric", Kind::Number, true),
                Column::plain("meta", "json", Kind::Json, true),
            ],
            key: vec![0],
            check_messages: BTreeMap::new(),
            scopes: Vec::new(),
            foreign_keys: Vec::new(),
            unique_keys: vec![vec![0]],
            hooks: Vec::new(),
            version: 1,
        }
    }

    fn message(result: Result<Vec<Aggregate<'_>>, DataError>) -> String {
        match result {
            Err(DataError::Query(e)) => e.message.to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_aggregates_and_refuses_what_does_not_apply() {
        let t = table();
        let list = aggregates(&t, &Access::All, "n:count(), s:sum(total),top:max(status)").unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].column, None);
        assert_eq!(list[1].function, Function::Sum);
        assert!(message(aggregates(&t, &Access::All, "s:sum(status)")).contains("does not apply"));
        assert!(message(aggregates(&t, &Access::All, "s:median(total)")).contains("one of"));
        assert!(message(aggregates(&t, &Access::All, "sum(total)")).contains("alias"));
        assert!(message(aggregates(&t, &Access::All, "a:count(),a:count()")).contains("twice"));
        assert!(message(aggregates(&t, &Access::All, "m:min(meta)")).contains("does not apply"));
        assert!(message(aggregates(&t, &Access::All, "x:sum(nope)")).contains("not a column"));
        let groups = group_by(&t, &Access::All, Some("status"), &list).unwrap();
        let keys = sort(Some("-n"), &groups, &list).unwrap();
        assert_eq!(keys, vec![("n", true), ("status", false)]);
        assert!(sort(Some("total"), &groups, &list).is_err());
    }
}
