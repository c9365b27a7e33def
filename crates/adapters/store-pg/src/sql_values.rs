//! Values of any type for the SQL console: JSON parameters bound in the
//! binary form of the type PostgreSQL inferred for them, and result cells of
//! any type written as JSON.
//!
//! Parameters take the common scalar types and arrays of text, integers and
//! uuids; another type is refused with a hint to cast from text in the
//! statement. Cells of the common types are written as the Data API writes
//! them (intervals in ISO 8601, `bytea` as `\x` hex, arrays as JSON arrays);
//! a type without a reader here comes as `\x` hex of its binary form.

use std::fmt::Write as _;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use kernel::StoreError;
use sea_orm::sqlx::postgres::{PgArguments, PgTypeInfo, PgTypeKind, PgValueFormat, PgValueRef};
use sea_orm::sqlx::{Arguments as _, TypeInfo as _, ValueRef as _};
use serde_json::Value;

use crate::json_rows::{Cell, push_time, write_string, write_value};

/// Type OIDs of PostgreSQL's built-in types read or bound here.
mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const VARCHAR_ARRAY: u32 = 1015;
    pub const INT8_ARRAY: u32 = 1016;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const UUID_ARRAY: u32 = 2951;
    pub const JSONB: u32 = 3802;
}

/// The built-in type behind `ty` (a domain's base type), as an OID.
fn base_oid(ty: &PgTypeInfo) -> Option<u32> {
    match ty.kind() {
        PgTypeKind::Domain(base) => base_oid(base),
        PgTypeKind::Enum(_) => Some(oid::TEXT),
        _ => ty.oid().map(|o| o.0),
    }
}

/// Adds `value` to `arguments` in the binary form of `ty`.
pub(crate) fn bind(
    arguments: &mut PgArguments,
    value: &Value,
    ty: &PgTypeInfo,
) -> Result<(), String> {
    let unsupported = || {
        format!(
            "a parameter of type {} cannot be bound; cast it from text in the statement ($n::text::{})",
            ty.name().to_lowercase(),
            ty.name().to_lowercase()
        )
    };
    let wrong = |what: &str| {
        format!(
            "must be {what} (a parameter of type {})",
            ty.name().to_lowercase()
        )
    };
    if value.is_null() {
        return add(arguments, Option::<String>::None);
    }
    match base_oid(ty).ok_or_else(unsupported)? {
        oid::BOOL => add(arguments, boolean(value).ok_or_else(|| wrong("a boolean"))?),
        oid::INT2 => add(
            arguments,
            integer::<i16>(value).ok_or_else(|| wrong("an integer"))?,
        ),
        oid::INT4 => add(
            arguments,
            integer::<i32>(value).ok_or_else(|| wrong("an integer"))?,
        ),
        oid::INT8 => add(
            arguments,
            integer::<i64>(value).ok_or_else(|| wrong("an integer"))?,
        ),
        oid::OID => add(
            arguments,
            sea_orm::sqlx::postgres::types::Oid(
                integer::<u32>(value).ok_or_else(|| wrong("an integer"))?,
            ),
        ),
        oid::FLOAT4 => add(
            arguments,
            float(value).ok_or_else(|| wrong("a number"))? as f32,
        ),
        oid::FLOAT8 => add(arguments, float(value).ok_or_else(|| wrong("a number"))?),
        oid::NUMERIC => {
            let text = scalar_text(value).ok_or_else(|| wrong("a number"))?;
            let number = rust_decimal::Decimal::from_str_exact(&text)
                .or_else(|_| rust_decimal::Decimal::from_scientific(&text))
                .map_err(|_| wrong("a number of at most 28 digits"))?;
            add(arguments, number)
        }
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::UNKNOWN => add(
            arguments,
            scalar_text(value).ok_or_else(|| wrong("a string"))?,
        ),
        oid::UUID => add(arguments, uuid_of(value).ok_or_else(|| wrong("a uuid"))?),
        oid::JSON | oid::JSONB => add(arguments, sea_orm::sqlx::types::Json(value.clone())),
        oid::DATE => add(
            arguments,
            value
                .as_str()
                .and_then(|t| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
                .ok_or_else(|| wrong("a date (YYYY-MM-DD)"))?,
        ),
        oid::TIME => add(
            arguments,
            value
                .as_str()
                .and_then(|t| NaiveTime::parse_from_str(t, "%H:%M:%S%.f").ok())
                .ok_or_else(|| wrong("a time (HH:MM:SS)"))?,
        ),
        oid::TIMESTAMP => add(
            arguments,
            value
                .as_str()
                .and_then(|t| NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").ok())
                .ok_or_else(|| wrong("a timestamp (YYYY-MM-DDTHH:MM:SS)"))?,
        ),
        oid::TIMESTAMPTZ => add(
            arguments,
            value
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc))
                .ok_or_else(|| wrong("an RFC 3339 timestamp"))?,
        ),
        oid::BYTEA => add(
            arguments,
            value
                .as_str()
                .and_then(hex_bytes)
                .ok_or_else(|| wrong("\\x followed by hex digits"))?,
        ),
        oid::TEXT_ARRAY | oid::VARCHAR_ARRAY => add(
            arguments,
            elements(value, scalar_text).ok_or_else(|| wrong("an array of strings"))?,
        ),
        oid::INT2_ARRAY => add(
            arguments,
            elements(value, integer::<i16>).ok_or_else(|| wrong("an array of integers"))?,
        ),
        oid::INT4_ARRAY => add(
            arguments,
            elements(value, integer::<i32>).ok_or_else(|| wrong("an array of integers"))?,
        ),
        oid::INT8_ARRAY => add(
            arguments,
            elements(value, integer::<i64>).ok_or_else(|| wrong("an array of integers"))?,
        ),
        oid::UUID_ARRAY => add(
            arguments,
            elements(value, uuid_of).ok_or_else(|| wrong("an array of uuids"))?,
        ),
        _ => Err(unsupported()),
    }
}

fn add<'q, T>(arguments: &mut PgArguments, value: T) -> Result<(), String>
where
    T: sea_orm::sqlx::Encode<'q, sea_orm::sqlx::Postgres>
        + sea_orm::sqlx::Type<sea_orm::sqlx::Postgres>
        + 'q,
{
    arguments.add(value).map_err(|e| e.to_string())
}

/// A string, or the JSON text of a number or boolean.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn integer<T: TryFrom<i64> + std::str::FromStr>(value: &Value) -> Option<T> {
    match value {
        Value::Number(n) => n.as_i64().and_then(|n| T::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn float(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn uuid_of(value: &Value) -> Option<uuid::Uuid> {
    value.as_str()?.parse().ok()
}

/// `\x0a1b...` as bytes.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    let digits = text.strip_prefix("\\x")?;
    if digits.len() % 2 != 0 {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The elements of a JSON array (nulls kept), each read by `read`.
fn elements<T>(value: &Value, read: impl Fn(&Value) -> Option<T>) -> Option<Vec<Option<T>>> {
    value
        .as_array()?
        .iter()
        .map(|v| {
            if v.is_null() {
                Some(None)
            } else {
                read(v).map(Some)
            }
        })
        .collect()
}

/// Writes the cell `value` of type `ty` as JSON.
pub(crate) fn write_any(
    out: &mut String,
    ty: &PgTypeInfo,
    value: PgValueRef<'_>,
) -> Result<(), StoreError> {
    if value.is_null() {
        out.push_str("null");
        return Ok(());
    }
    if value.format() != PgValueFormat::Binary {
        return Err(StoreError::Internal("a text-format cell".into()));
    }
    let bytes = value
        .as_bytes()
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    write_cell(out, ty, bytes)
}

fn write_cell(out: &mut String, ty: &PgTypeInfo, bytes: &[u8]) -> Result<(), StoreError> {
    if let PgTypeKind::Array(element) = ty.kind() {
        return write_array(out, element, bytes);
    }
    let cell = match base_oid(ty) {
        Some(oid::BOOL) => Cell::Bool,
        Some(oid::INT2) => Cell::Int2,
        Some(oid::INT4) => Cell::Int4,
        Some(oid::INT8) => Cell::Int8,
        Some(oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::UNKNOWN) => Cell::Text,
        Some(oid::UUID) => Cell::Uuid,
        Some(oid::DATE) => Cell::Date,
        Some(oid::TIMESTAMP) => Cell::Timestamp,
        Some(oid::TIMESTAMPTZ) => Cell::TimestampTz,
        Some(oid::NUMERIC) => Cell::Numeric,
        Some(oid::JSON) => Cell::Json,
        // jsonb: a version byte, then the text.
        Some(oid::JSONB) => {
            return write_value(out, Cell::Json, bytes.get(1..).unwrap_or_default());
        }
        Some(oid::OID) => {
            let n = u32::from_be_bytes(fixed(bytes)?);
            out.push_str(itoa::Buffer::new().format(n));
            return Ok(());
        }
        Some(oid::FLOAT4) => return write_float(out, f32::from_be_bytes(fixed(bytes)?)),
        Some(oid::FLOAT8) => return write_float(out, f64::from_be_bytes(fixed(bytes)?)),
        Some(oid::TIME) => {
            out.push('"');
            push_time(out, i64::from_be_bytes(fixed(bytes)?));
            out.push('"');
            return Ok(());
        }
        Some(oid::INTERVAL) => return write_interval(out, bytes),
        _ => {
            write_hex(out, bytes);
            return Ok(());
        }
    };
    write_value(out, cell, bytes)
}

fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], StoreError> {
    bytes
        .try_into()
        .map_err(|_| StoreError::Internal("a cell of the wrong size".into()))
}

/// A float as a JSON number (the shortest text that reads back the same, as
/// PostgreSQL writes it); NaN and the infinities as PostgreSQL names them, quoted.
fn write_float<F>(out: &mut String, value: F) -> Result<(), StoreError>
where
    F: Into<f64> + Copy + std::fmt::Display,
{
    let wide: f64 = value.into();
    if wide.is_nan() {
        out.push_str("\"NaN\"");
    } else if wide.is_infinite() {
        out.push_str(if wide > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        // Writing to a string cannot fail.
        let _ = write!(out, "{value}");
    }
    Ok(())
}

/// `"\x"` and the bytes in lower-case hex, as PostgreSQL writes `bytea`.
fn write_hex(out: &mut String, bytes: &[u8]) {
    out.push_str("\"\\\\x");
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out.push('"');
}

/// An interval (microseconds, days, months) in ISO 8601, such as `"P1Y2M3DT4H5M6.5S"`.
fn write_interval(out: &mut String, bytes: &[u8]) -> Result<(), StoreError> {
    let micros = i64::from_be_bytes(fixed(bytes.get(..8).unwrap_or_default())?);
    let days = i32::from_be_bytes(fixed(bytes.get(8..12).unwrap_or_default())?);
    let months = i32::from_be_bytes(fixed(bytes.get(12..16).unwrap_or_default())?);
    let mut text = String::from("P");
    for (n, unit) in [(months / 12, 'Y'), (months % 12, 'M'), (days, 'D')] {
        if n != 0 {
            let _ = write!(text, "{n}{unit}");
        }
    }
    if micros != 0 {
        text.push('T');
        let (hours, rest) = (micros / 3_600_000_000, micros % 3_600_000_000);
        let (minutes, rest) = (rest / 60_000_000, rest % 60_000_000);
        if hours != 0 {
            let _ = write!(text, "{hours}H");
        }
        if minutes != 0 {
            let _ = write!(text, "{minutes}M");
        }
        if rest != 0 {
            let seconds = format!("{:.6}", rest as f64 / 1e6);
            let _ = write!(
                text,
                "{}S",
                seconds.trim_end_matches('0').trim_end_matches('.')
            );
        }
    } else if text.len() == 1 {
        text.push_str("T0S");
    }
    write_string(out, &text);
    Ok(())
}

/// An array in PostgreSQL's binary form (dimensions, then each element with
/// its length, -1 for null) as nested JSON arrays.
fn write_array(out: &mut String, element: &PgTypeInfo, bytes: &[u8]) -> Result<(), StoreError> {
    let int = |at: usize| -> Result<i32, StoreError> {
        Ok(i32::from_be_bytes(fixed(
            bytes.get(at..at + 4).unwrap_or_default(),
        )?))
    };
    let dimensions = usize::try_from(int(0)?).unwrap_or(0);
    let lengths = (0..dimensions)
        .map(|d| int(12 + 8 * d).map(|n| usize::try_from(n).unwrap_or(0)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut at = 12 + 8 * dimensions;
    if dimensions == 0 {
        out.push_str("[]");
        return Ok(());
    }
    write_dimension(out, element, bytes, &lengths, &mut at)
}

fn write_dimension(
    out: &mut String,
    element: &PgTypeInfo,
    bytes: &[u8],
    lengths: &[usize],
    at: &mut usize,
) -> Result<(), StoreError> {
    out.push('[');
    for i in 0..lengths.first().copied().unwrap_or(0) {
        if i > 0 {
            out.push(',');
        }
        if lengths.len() > 1 {
            write_dimension(out, element, bytes, &lengths[1..], at)?;
            continue;
        }
        let length = i32::from_be_bytes(fixed(bytes.get(*at..*at + 4).unwrap_or_default())?);
        *at += 4;
        match usize::try_from(length) {
            Err(_) => out.push_str("null"),
            Ok(length) => {
                let cell = bytes
                    .get(*at..*at + length)
                    .ok_or_else(|| StoreError::Internal("a short array".into()))?;
                write_cell(out, element, cell)?;
                *at += length;
            }
        }
    }
    out.push(']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(micros: i64, days: i32, months: i32) -> String {
        let mut bytes = micros.to_be_bytes().to_vec();
        bytes.extend(days.to_be_bytes());
        bytes.extend(months.to_be_bytes());
        let mut out = String::new();
        write_interval(&mut out, &bytes).unwrap();
        out
    }

    #[test]
    fn intervals_are_written_in_iso_8601() {
        assert_eq!(interval(0, 0, 0), "\"PT0S\"");
        assert_eq!(interval(14_706_500_000, 3, 14), "\"P1Y2M3DT4H5M6.5S\"");
        assert_eq!(interval(-60_000_000, 0, 0), "\"PT-1M\"");
    }

    #[test]
    fn bytes_are_hex_and_hex_reads_back() {
        let mut out = String::new();
        write_hex(&mut out, &[0, 0xab, 0x10]);
        assert_eq!(out, "\"\\\\x00ab10\"");
        assert_eq!(hex_bytes("\\x00ab10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(hex_bytes("00ab"), None);
        assert_eq!(hex_bytes("\\x0"), None);
    }

    #[test]
    fn floats_keep_their_specials_quoted() {
        for (value, text) in [
            (1.5, "1.5"),
            (f64::NAN, "\"NaN\""),
            (f64::NEG_INFINITY, "\"-Infinity\""),
        ] {
            let mut out = String::new();
            write_float(&mut out, value).unwrap();
            assert_eq!(out, text);
        }
        let mut out = String::new();
        write_float(&mut out, 0.1f32).unwrap();
        assert_eq!(out, "0.1");
    }
}
