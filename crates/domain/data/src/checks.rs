//! Checks of a request against the table and the caller's grants: every
//! name, value and key is known, allowed and of the right type before the
//! store sees it.

use kernel::filter::{Filter, Op, Operand};
use permissions::Access;
use serde_json::{Map, Value};

use crate::error::{DataError, payload_error, query_error};
use crate::query::{Output, Predicate};
use crate::table::{Column, Kind, SERVICE_TABLES, Table};

/// The caller's own condition, AND the grants' row filters, AND the key.
pub(crate) fn scoped<'a>(
    own: Option<Predicate<'a>>,
    access: &Access<'a>,
    key: Option<Predicate<'a>>,
) -> Predicate<'a> {
    Predicate::All(
        [key, own, Predicate::any_of(access.row_filters())]
            .into_iter()
            .flatten()
            .collect(),
    )
}

/// The grants that cover every column of a write; 400 when none covers them all.
pub(crate) fn cover<'a>(
    access: &Access<'a>,
    columns: &[&Column],
    path: &str,
) -> Result<Access<'a>, DataError> {
    access
        .covering(columns.iter().map(|c| c.name.as_str()))
        .ok_or_else(|| {
            payload_error(
                if path.is_empty() { "data" } else { path }.to_owned(),
                "no single grant of yours covers all these columns",
            )
        })
}

/// Every column `access` reads, each masked on the rows its grants miss.
pub(crate) fn readable_columns<'t>(table: &'t Table, access: &Access<'t>) -> Vec<Output<'t>> {
    table
        .columns
        .iter()
        .filter(|c| access.covers(&c.name))
        .map(|column| masked(access, column))
        .collect()
}

pub(crate) fn masked<'t>(access: &Access<'t>, column: &'t Column) -> Output<'t> {
    Output {
        column,
        mask: access.column_filters(&column.name),
    }
}

/// Every readable column hidden on some rows, with its mask: the caller's
/// filter and sort read these columns through it.
pub fn masks<'t>(table: &'t Table, access: &Access<'t>) -> Vec<Output<'t>> {
    table
        .columns
        .iter()
        .filter_map(|column| {
            access.column_filters(&column.name).map(|mask| Output {
                column,
                mask: Some(mask),
            })
        })
        .collect()
}

/// A column the caller may read, or a 400 on `field`.
pub(crate) fn readable<'t>(
    table: &'t Table,
    access: &Access<'_>,
    name: &str,
    field: &'static str,
) -> Result<&'t Column, DataError> {
    let column = table
        .column(name)
        .ok_or_else(|| query_error(field, format!("{name} is not a column of the table")))?;
    if access.covers(name) {
        Ok(column)
    } else {
        Err(query_error(
            field,
            format!("{name} is not readable under your grants"),
        ))
    }
}

/// `sort=-a,b`: the primary key is appended so pages are stable.
pub fn sort<'t>(
    table: &'t Table,
    access: &Access<'_>,
    raw: Option<&str>,
) -> Result<Vec<(&'t Column, bool)>, DataError> {
    let mut keys: Vec<(&'t Column, bool)> = Vec::new();
    for part in raw.into_iter().flat_map(|r| r.split(',')).map(str::trim) {
        let (name, descending) = match part.strip_prefix('-') {
            Some(name) => (name, true),
            None => (part, false),
        };
        let column = readable(table, access, name, "sort")?;
        if !column.kind.is_comparable() {
            return Err(query_error("sort", format!("{name} cannot be sorted")));
        }
        if !keys.iter().any(|(c, _)| c.name == name) {
            keys.push((column, descending));
        }
    }
    for column in table.key_columns() {
        if !keys.iter().any(|(c, _)| c.name == column.name) {
            keys.push((column, false));
        }
    }
    Ok(keys)
}

/// A whole-number query parameter from `min` to `max`; `default` when absent.
pub fn number<T: TryFrom<u64> + Copy>(
    raw: Option<&str>,
    field: &'static str,
    default: T,
    min: u64,
    max: u64,
) -> Result<T, DataError> {
    let Some(raw) = raw else { return Ok(default) };
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| query_error(field, format!("must be a whole number from {min} to {max}")))
}

/// Parses the `filter` parameter and checks every column, operator and value.
pub fn parse_filter(table: &Table, access: &Access<'_>, raw: &str) -> Result<Filter, DataError> {
    let value: Value = serde_json::from_str(raw)
        .map_err(|_| query_error("filter", "must be a JSON filter object"))?;
    let filter = Filter::parse(&value, "filter").map_err(DataError::Query)?;
    check_filter(table, access, &filter)?;
    Ok(filter)
}

/// Checks that every column of `filter` is readable and fits its operators and values.
pub fn check_filter(table: &Table, access: &Access<'_>, filter: &Filter) -> Result<(), DataError> {
    match filter {
        Filter::And(items) | Filter::Or(items) => items
            .iter()
            .try_for_each(|f| check_filter(table, access, f)),
        Filter::Not(inner) => check_filter(table, access, inner),
        Filter::Condition {
            column,
            op,
            operand,
        } => {
            let col = readable(table, access, column, "filter")?;
            let bad = |why: &str| query_error("filter", format!("{column}: {why}"));
            match op {
                Op::IsNull => return Ok(()),
                Op::Like | Op::Ilike if !col.kind.is_text() => {
                    return Err(bad("like and ilike apply to text columns only"));
                }
                Op::Search if !col.kind.is_text() => {
                    return Err(bad("search applies to text columns only"));
                }
                _ if !col.kind.is_comparable() => {
                    return Err(bad("this column's type only takes isNull"));
                }
                _ => {}
            }
            check_operand(col, operand).map_err(|why| bad(&why))
        }
    }
}

fn check_operand(column: &Column, operand: &Operand) -> Result<(), String> {
    match operand {
        Operand::Literal(value) if column.kind.accepts(value) => Ok(()),
        Operand::Literal(_) => Err(format!("the value must be {}", column.kind.describe())),
        Operand::Period(_) if column.kind.is_temporal() => Ok(()),
        Operand::Period(_) => {
            Err("$PERIOD values compare with date and timestamp columns only".into())
        }
        Operand::User(name) if user_column(name) => Ok(()),
        Operand::User(name) => Err(format!("$USER.{name} is not a readable user column")),
        Operand::List(items) => items
            .iter()
            .try_for_each(|item| check_operand(column, item)),
    }
}

/// Whether `$USER.<name>` may be used: the user columns the Data API shows.
pub fn user_column(name: &str) -> bool {
    SERVICE_TABLES
        .iter()
        .find(|(table, _)| *table == "users")
        .is_some_and(|(_, columns)| columns.contains(&name))
}

/// The primary key in the path; a value that does not parse as the key's type is an unknown id.
pub(crate) fn key_of<'a>(table: &'a Table, raw: &'a str) -> Result<Predicate<'a>, DataError> {
    if table.key.is_empty() {
        return Err(DataError::NotFound);
    }
    let parts: Vec<&str> = if table.key.len() == 1 {
        vec![raw]
    } else {
        raw.split(',').collect()
    };
    if parts.len() != table.key.len() {
        return Err(DataError::NotFound);
    }
    let pairs: Vec<(&Column, &str)> = table.key_columns().zip(parts).collect();
    let fits = |(column, text): &(&Column, &str)| match column.kind {
        Kind::Integer => text.parse::<i64>().is_ok(),
        Kind::Number => text.parse::<f64>().is_ok(),
        Kind::Uuid => uuid::Uuid::parse_str(text).is_ok(),
        Kind::Boolean => matches!(*text, "true" | "false"),
        _ => true,
    };
    if pairs.iter().all(fits) {
        Ok(Predicate::Key(pairs))
    } else {
        Err(DataError::NotFound)
    }
}

/// The field of column `name` in the row at `path`, relative to the
/// payload as everywhere: `title`, `[2].title`.
pub(crate) fn field_of(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// The columns of a row body, each known, writable, of the right kind and
/// covered by some grant.
pub(crate) fn checked_columns<'t>(
    table: &'t Table,
    access: &Access<'_>,
    row: &Map<String, Value>,
    path: &str,
) -> Result<Vec<&'t Column>, DataError> {
    row.iter()
        .map(|(name, value)| {
            let field = || field_of(path, name);
            let column = table
                .column(name)
                .ok_or_else(|| payload_error(field(), "is not a column of the table"))?;
            if !column.writable {
                return Err(payload_error(field(), "is generated by the database"));
            }
            if !access.covers(name) {
                return Err(payload_error(field(), "is not writable under your grants"));
            }
            if table.admin_only(name) && !matches!(access, Access::All) {
                return Err(payload_error(field(), "is written by administrators only"));
            }
            if !column.kind.accepts(value) {
                return Err(payload_error(
                    field(),
                    format!("must be {}", column.kind.describe()),
                ));
            }
            Ok(column)
        })
        .collect()
}
