//! Rows read in PostgreSQL's binary format and written as JSON in Rust, the
//! way PostgreSQL's own `to_json` writes them, so PostgreSQL only selects
//! rows. Common types are decoded here; any other type is selected as
//! `to_json(value)::text` and passed through.

use std::fmt::Write as _;

use chrono::{Datelike, Duration, NaiveDate};
use data::{Column, Kind};
use kernel::StoreError;
use sea_orm::sqlx::Row as _;
use sea_orm::sqlx::postgres::{PgRow, PgValueFormat};

/// How one answer column is read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cell {
    Int2,
    Int4,
    Int8,
    Bool,
    Text,
    Uuid,
    Date,
    Timestamp,
    TimestampTz,
    /// JSON text built by PostgreSQL (`to_json(value)::text`).
    Json,
}

impl Cell {
    /// The cell for a column, from its exact SQL type.
    pub(crate) fn of(column: &Column) -> Self {
        match (column.kind, column.sql_type.as_str()) {
            (Kind::Integer, "smallint") => Cell::Int2,
            (Kind::Integer, "integer") => Cell::Int4,
            (Kind::Integer, "bigint") => Cell::Int8,
            (Kind::Boolean, _) => Cell::Bool,
            (Kind::Text, t) if t == "text" || t.starts_with("character varying") => Cell::Text,
            (Kind::Uuid, _) => Cell::Uuid,
            (Kind::Date, _) => Cell::Date,
            (Kind::Timestamp, _) => Cell::Timestamp,
            (Kind::TimestampTz, _) => Cell::TimestampTz,
            _ => Cell::Json,
        }
    }
}

fn bad(what: &str) -> StoreError {
    StoreError::Internal(format!("cannot read a {what} value"))
}

fn fixed<const N: usize>(bytes: &[u8], what: &str) -> Result<[u8; N], StoreError> {
    bytes.try_into().map_err(|_| bad(what))
}

/// Writes `{"name":value,...}` for one row whose columns are `cells`;
/// `keys` are the JSON-quoted names followed by `:`.
pub(crate) fn write_object(
    out: &mut String,
    row: &PgRow,
    keys: &[String],
    cells: &[Cell],
) -> Result<(), StoreError> {
    out.push('{');
    for (i, (key, cell)) in keys.iter().zip(cells).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key);
        let value = row
            .try_get_raw(i)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        if value.format() != PgValueFormat::Binary {
            return Err(bad("text-format"));
        }
        match value.as_bytes() {
            Err(_) => out.push_str("null"),
            Ok(bytes) => write_value(out, *cell, bytes)?,
        }
    }
    out.push('}');
    Ok(())
}

fn write_value(out: &mut String, cell: Cell, bytes: &[u8]) -> Result<(), StoreError> {
    let mut digits = itoa::Buffer::new();
    match cell {
        Cell::Int2 => out.push_str(digits.format(i16::from_be_bytes(fixed(bytes, "smallint")?))),
        Cell::Int4 => out.push_str(digits.format(i32::from_be_bytes(fixed(bytes, "integer")?))),
        Cell::Int8 => out.push_str(digits.format(i64::from_be_bytes(fixed(bytes, "bigint")?))),
        Cell::Bool => out.push_str(if bytes.first() == Some(&1) {
            "true"
        } else {
            "false"
        }),
        Cell::Text => {
            let text = std::str::from_utf8(bytes).map_err(|_| bad("text"))?;
            write_string(out, text);
        }
        Cell::Uuid => {
            let id = uuid::Uuid::from_bytes(fixed(bytes, "uuid")?);
            out.push('"');
            out.push_str(
                id.hyphenated()
                    .encode_lower(&mut uuid::Uuid::encode_buffer()),
            );
            out.push('"');
        }
        Cell::Date => write_date(out, i32::from_be_bytes(fixed(bytes, "date")?)),
        Cell::Timestamp => {
            write_timestamp(out, i64::from_be_bytes(fixed(bytes, "timestamp")?), "");
        }
        Cell::TimestampTz => write_timestamp(
            out,
            i64::from_be_bytes(fixed(bytes, "timestamptz")?),
            "+00:00",
        ),
        Cell::Json => out.push_str(std::str::from_utf8(bytes).map_err(|_| bad("json"))?),
    }
    Ok(())
}

/// A JSON string, escaped as serde_json escapes it.
pub(crate) fn write_string(out: &mut String, text: &str) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..0x20 => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The date `days` after 2000-01-01, if chrono can hold it.
fn date_of(days: i64) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(2000, 1, 1)?.checked_add_signed(Duration::try_days(days)?)
}

/// `n` as at least two digits.
fn push_two(out: &mut String, n: u32) {
    if n < 10 {
        out.push('0');
    }
    out.push_str(itoa::Buffer::new().format(n));
}

/// `YYYY-MM-DD` (years outside 1 to 9999 as chrono writes them).
fn push_date(out: &mut String, date: NaiveDate) {
    let year = date.year();
    if (1..=9999).contains(&year) {
        let mut digits = itoa::Buffer::new();
        let text = digits.format(year);
        out.push_str(&"000"[..4 - text.len()]);
        out.push_str(text);
        out.push('-');
        push_two(out, date.month());
        out.push('-');
        push_two(out, date.day());
    } else {
        // Writing to a string cannot fail.
        let _ = write!(out, "{}", date.format("%Y-%m-%d"));
    }
}

/// A date as `"YYYY-MM-DD"`; PostgreSQL's infinities as words.
fn write_date(out: &mut String, days: i32) {
    let date = (days != i32::MAX && days != i32::MIN)
        .then(|| date_of(i64::from(days)))
        .flatten();
    match date {
        Some(date) => {
            out.push('"');
            push_date(out, date);
            out.push('"');
        }
        None if days < 0 => out.push_str("\"-infinity\""),
        None => out.push_str("\"infinity\""),
    }
}

/// A timestamp as `"YYYY-MM-DDTHH:MM:SS[.ffffff]"` plus `zone` (the
/// fraction without trailing zeros, as PostgreSQL writes it); PostgreSQL's
/// infinities as words.
fn write_timestamp(out: &mut String, micros: i64, zone: &str) {
    let seconds = micros.div_euclid(1_000_000);
    let date = (micros != i64::MAX && micros != i64::MIN)
        .then(|| date_of(seconds.div_euclid(86_400)))
        .flatten();
    let Some(date) = date else {
        out.push_str(if micros < 0 {
            "\"-infinity\""
        } else {
            "\"infinity\""
        });
        return;
    };
    // In 0..86_400: fits.
    let of_day = u32::try_from(seconds.rem_euclid(86_400)).unwrap_or_default();
    out.push('"');
    push_date(out, date);
    out.push('T');
    push_two(out, of_day / 3600);
    out.push(':');
    push_two(out, of_day / 60 % 60);
    out.push(':');
    push_two(out, of_day % 60);
    let fraction = micros.rem_euclid(1_000_000);
    if fraction != 0 {
        let mut digits = itoa::Buffer::new();
        let text = digits.format(fraction + 1_000_000);
        out.push('.');
        out.push_str(text[1..].trim_end_matches('0'));
    }
    out.push_str(zone);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(cell: Cell, bytes: &[u8]) -> String {
        let mut out = String::new();
        write_value(&mut out, cell, bytes).unwrap();
        out
    }

    #[test]
    fn values_are_written_as_postgres_writes_them() {
        assert_eq!(written(Cell::Int2, &(-7i16).to_be_bytes()), "-7");
        assert_eq!(
            written(Cell::Int8, &i64::MAX.to_be_bytes()),
            i64::MAX.to_string()
        );
        assert_eq!(written(Cell::Bool, &[1]), "true");
        assert_eq!(
            written(Cell::Text, "a\"b\n\u{1}é".as_bytes()),
            r#""a\"b\n\u0001é""#
        );
        assert_eq!(
            written(Cell::Uuid, &[0xab; 16]),
            "\"abababab-abab-abab-abab-abababababab\""
        );
        // 2024-01-01 is 8766 days after 2000-01-01.
        assert_eq!(
            written(Cell::Date, &8766i32.to_be_bytes()),
            "\"2024-01-01\""
        );
        assert_eq!(written(Cell::Date, &i32::MAX.to_be_bytes()), "\"infinity\"");
        let at = 8766i64 * 86_400_000_000 + 360_000_000;
        assert_eq!(
            written(Cell::TimestampTz, &at.to_be_bytes()),
            "\"2024-01-01T00:06:00+00:00\""
        );
        assert_eq!(
            written(Cell::Timestamp, &(at + 500_000).to_be_bytes()),
            "\"2024-01-01T00:06:00.5\""
        );
        assert_eq!(
            written(Cell::TimestampTz, &(-1i64).to_be_bytes()),
            "\"1999-12-31T23:59:59.999999+00:00\""
        );
        assert_eq!(
            written(Cell::TimestampTz, &i64::MIN.to_be_bytes()),
            "\"-infinity\""
        );
        assert_eq!(written(Cell::Json, b"[1,{\"a\":2}]"), "[1,{\"a\":2}]");
        // 0045-03-15 and a year past 9999: four digits, then chrono's own form.
        assert_eq!(
            written(Cell::Date, &(-713_975i32).to_be_bytes()),
            "\"0045-03-15\""
        );
        assert!(written(Cell::Date, &3_789_000i32.to_be_bytes()).starts_with("\"+"));
    }
}
