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
    Numeric,
    /// JSON text built by PostgreSQL (`to_json(value)::text`).
    Json,
    /// A related row: NULL when there is none, else the object of the
    /// next this many columns.
    Object(usize),
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
            (Kind::Number, t) if t == "numeric" || t.starts_with("numeric(") => Cell::Numeric,
            _ => Cell::Json,
        }
    }
}

/// Appends the JSON `text` without whitespace between its tokens: PostgreSQL
/// writes `jsonb` as `{"a": 1}`, and a `json` value keeps the spacing it was
/// stored with; every answer of the API is compact.
pub(crate) fn push_compact(out: &mut String, text: &str) {
    let mut spacing = Spacing::default();
    match text.char_indices().find(|&(_, c)| spacing.skips(c)) {
        // Already compact (the usual case): copied as it is.
        None => out.push_str(text),
        Some((at, _)) => {
            out.push_str(&text[..at]);
            out.extend(text[at..].chars().filter(|&c| !spacing.skips(c)));
        }
    }
}

/// [`push_compact`] for JSON text built by PostgreSQL, in place: kept as
/// it is when already compact, else its spacing removed within its own
/// buffer (an answer near `data.max_answer_bytes` is never held twice).
pub(crate) fn compact(text: String) -> String {
    let mut spacing = Spacing::default();
    let Some(at) = text.bytes().position(|b| spacing.skips(char::from(b))) else {
        return text;
    };
    // Whitespace, quotes and backslashes are ASCII, and no byte of a
    // multi-byte character is: the scan goes byte by byte.
    let mut bytes = text.into_bytes();
    let mut kept = at;
    for read in at + 1..bytes.len() {
        let byte = bytes[read];
        if !spacing.skips(char::from(byte)) {
            bytes[kept] = byte;
            kept += 1;
        }
    }
    bytes.truncate(kept);
    // Only ASCII whitespace was taken out, so the text is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Where a scan of JSON text stands: inside a string or not.
#[derive(Default)]
struct Spacing {
    in_string: bool,
    escaped: bool,
}

impl Spacing {
    /// Whether `c`, the next character, is whitespace between tokens.
    fn skips(&mut self, c: char) -> bool {
        if self.in_string {
            match (self.escaped, c) {
                (true, _) => self.escaped = false,
                (false, '\\') => self.escaped = true,
                (false, '"') => self.in_string = false,
                _ => {}
            }
            false
        } else {
            self.in_string = c == '"';
            c.is_ascii_whitespace()
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
    let mut columns = (0..row.len()).map(|i| {
        let value = row
            .try_get_raw(i)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        if value.format() != PgValueFormat::Binary {
            return Err(bad("text-format"));
        }
        Ok(value.as_bytes().ok())
    });
    write_entries(out, &mut columns, keys, cells)
}

/// Writes `{"key":value,...}`, each entry of `keys` and `cells` taking the
/// next of `values` (NULL as `None`); a [`Cell::Object`] value is a
/// record whose fields the entries after it take.
fn write_entries<'v>(
    out: &mut String,
    values: &mut impl Iterator<Item = Result<Option<&'v [u8]>, StoreError>>,
    keys: &[String],
    cells: &[Cell],
) -> Result<(), StoreError> {
    out.push('{');
    let mut i = 0;
    while let (Some(key), Some(&cell)) = (keys.get(i), cells.get(i)) {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key);
        let value = values.next().ok_or_else(|| bad("row"))??;
        i += 1;
        match (cell, value) {
            (Cell::Object(width), record) => {
                let inner = i..i + width;
                match (record, keys.get(inner.clone()), cells.get(inner)) {
                    (None, _, _) => out.push_str("null"),
                    (Some(record), Some(keys), Some(cells)) => {
                        write_entries(out, &mut RecordFields::of(record)?, keys, cells)?;
                    }
                    _ => return Err(bad("related row")),
                }
                i += width;
            }
            (_, None) => out.push_str("null"),
            (cell, Some(bytes)) => write_value(out, cell, bytes)?,
        }
    }
    out.push('}');
    Ok(())
}

/// The fields of a `record` in PostgreSQL's binary form: their count,
/// then each field's type oid, length (-1 for NULL) and bytes.
struct RecordFields<'v> {
    rest: &'v [u8],
    left: usize,
}

impl<'v> RecordFields<'v> {
    fn of(bytes: &'v [u8]) -> Result<Self, StoreError> {
        let count = bytes.get(..4).ok_or_else(|| bad("record"))?;
        Ok(Self {
            rest: &bytes[4..],
            left: usize::try_from(i32::from_be_bytes(fixed(count, "record")?))
                .map_err(|_| bad("record"))?,
        })
    }
}

impl<'v> Iterator for RecordFields<'v> {
    type Item = Result<Option<&'v [u8]>, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Some(length) = self.rest.get(4..8) else {
            return Some(Err(bad("record")));
        };
        let length = match fixed(length, "record") {
            Ok(length) => i32::from_be_bytes(length),
            Err(error) => return Some(Err(error)),
        };
        self.rest = &self.rest[8..];
        let Ok(length) = usize::try_from(length) else {
            return Some(Ok(None));
        };
        let Some(field) = self.rest.get(..length) else {
            return Some(Err(bad("record")));
        };
        self.rest = &self.rest[length..];
        Some(Ok(Some(field)))
    }
}

pub(crate) fn write_value(out: &mut String, cell: Cell, bytes: &[u8]) -> Result<(), StoreError> {
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
        Cell::Numeric => write_numeric(out, bytes)?,
        Cell::Json => push_compact(out, std::str::from_utf8(bytes).map_err(|_| bad("json"))?),
        Cell::Object(_) => return Err(bad("related row")),
    }
    Ok(())
}

/// A numeric from its binary form (digit count, weight, sign, display scale,
/// then base-10000 digits), written as PostgreSQL's `numeric_out` writes it:
/// a bare JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"` quoted.
fn write_numeric(out: &mut String, bytes: &[u8]) -> Result<(), StoreError> {
    let word = |at: usize| -> Result<u16, StoreError> {
        bytes
            .get(at..at + 2)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_be_bytes)
            .ok_or_else(|| bad("numeric"))
    };
    let count = usize::from(word(0)?);
    let weight = i32::from(word(2)? as i16);
    let scale = i32::from(word(6)?);
    let special = match word(4)? {
        0xC000 => "\"NaN\"",
        0xD000 => "\"Infinity\"",
        0xF000 => "\"-Infinity\"",
        0x4000 => "-",
        _ => "",
    };
    out.push_str(special);
    if special.len() > 1 {
        return Ok(());
    }
    let digits = (0..count)
        .map(|i| word(8 + 2 * i))
        .collect::<Result<Vec<u16>, _>>()?;
    // The base-10000 digit at `index` (0 is the one of weight `weight`).
    let digit = |index: i32| {
        usize::try_from(index)
            .ok()
            .and_then(|i| digits.get(i))
            .copied()
            .unwrap_or(0)
    };
    let mut text = itoa::Buffer::new();
    if weight < 0 {
        out.push('0');
    } else {
        out.push_str(text.format(digit(0)));
        for index in 1..=weight {
            let four = text.format(digit(index) + 10_000);
            out.push_str(&four[1..]);
        }
    }
    if scale > 0 {
        out.push('.');
        let mut written = 0;
        let mut index = weight + 1;
        while written < scale {
            let four = text.format(digit(index) + 10_000);
            let take = usize::try_from((scale - written).min(4)).unwrap_or(4);
            out.push_str(&four[1..=take]);
            written += 4;
            index += 1;
        }
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
    out.push('"');
    push_date(out, date);
    out.push('T');
    push_time(out, micros.rem_euclid(86_400_000_000));
    out.push_str(zone);
    out.push('"');
}

/// `HH:MM:SS[.ffffff]` of `micros` after midnight (the fraction without
/// trailing zeros, as PostgreSQL writes it).
pub(crate) fn push_time(out: &mut String, micros: i64) {
    // In 0..86_400 (24:00:00 for a time of day at its end): fits.
    let of_day = u32::try_from(micros.div_euclid(1_000_000)).unwrap_or_default();
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(cell: Cell, bytes: &[u8]) -> String {
        let mut out = String::new();
        write_value(&mut out, cell, bytes).unwrap();
        out
    }

    /// A record's binary form: its fields, each with its type oid.
    fn record(fields: &[(u32, Option<&[u8]>)]) -> Vec<u8> {
        let mut bytes = (fields.len() as i32).to_be_bytes().to_vec();
        for (oid, field) in fields {
            bytes.extend_from_slice(&oid.to_be_bytes());
            match field {
                None => bytes.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(field) => {
                    bytes.extend_from_slice(&(field.len() as i32).to_be_bytes());
                    bytes.extend_from_slice(field);
                }
            }
        }
        bytes
    }

    #[test]
    fn a_related_record_is_a_nested_object_and_null_when_missing() {
        let keys: Vec<String> = [
            "\"id\":",
            "\"author\":",
            "\"name\":",
            "\"team\":",
            "\"boss\":",
            "\"id\":",
            "\"gone\":",
        ]
        .map(str::to_owned)
        .to_vec();
        let cells = [
            Cell::Int4,
            Cell::Object(4),
            Cell::Text,
            Cell::Text,
            Cell::Object(1),
            Cell::Int8,
            Cell::Object(0),
        ];
        let boss = record(&[(20, Some(&9i64.to_be_bytes()))]);
        let author = record(&[(25, Some(b"Ada")), (25, None), (2249, Some(&boss))]);
        let write = |values: Vec<Option<&[u8]>>| {
            let mut out = String::new();
            let mut values = values.into_iter().map(Ok);
            write_entries(&mut out, &mut values, &keys, &cells).unwrap();
            out
        };
        assert_eq!(
            write(vec![Some(&7i32.to_be_bytes()), Some(&author), None]),
            r#"{"id":7,"author":{"name":"Ada","team":null,"boss":{"id":9}},"gone":null}"#
        );
        assert_eq!(
            write(vec![Some(&7i32.to_be_bytes()), None, Some(&record(&[]))]),
            r#"{"id":7,"author":null,"gone":{}}"#
        );
        // A record cut short is refused, never read past its end.
        let mut out = String::new();
        let short = &author[..author.len() - 3];
        let id = 7i32.to_be_bytes();
        let mut values = vec![Ok(Some(&id[..])), Ok(Some(short))].into_iter();
        assert!(write_entries(&mut out, &mut values, &keys, &cells).is_err());
    }

    /// A numeric's binary form: digit count, weight, sign, scale, digits.
    fn numeric(weight: i16, sign: u16, scale: u16, digits: &[u16]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [digits.len() as u16, weight as u16, sign, scale]
            .into_iter()
            .chain(digits.iter().copied())
        {
            bytes.extend_from_slice(&word.to_be_bytes());
        }
        bytes
    }

    #[test]
    fn numerics_keep_their_digits_and_scale() {
        let cases: [(Vec<u8>, &str); 9] = [
            (numeric(0, 0, 2, &[12, 5000]), "12.50"),
            (numeric(0, 0x4000, 0, &[7]), "-7"),
            (numeric(0, 0, 0, &[]), "0"),
            (numeric(-1, 0, 4, &[1]), "0.0001"),
            (numeric(1, 0, 4, &[1]), "10000.0000"),
            (numeric(-2, 0, 9, &[1230]), "0.000012300"),
            (
                numeric(5, 0, 21, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1000]),
                "100000000000000000000.000000000000000000001",
            ),
            (numeric(0, 0xC000, 0, &[]), "\"NaN\""),
            (numeric(0, 0xF000, 0, &[]), "\"-Infinity\""),
        ];
        for (bytes, text) in cases {
            assert_eq!(written(Cell::Numeric, &bytes), text);
        }
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
        assert_eq!(
            written(Cell::Json, b"{\"a b\": [1, 2],\n \"c\": \"x \\\" y\"}"),
            "{\"a b\":[1,2],\"c\":\"x \\\" y\"}"
        );
        assert_eq!(compact("{\"a\": 1}".to_owned()), "{\"a\":1}");
        assert_eq!(
            compact("[{\"ü ß\": \"a \\\" é\"}, \n {\"x\": [1, 2]}]".to_owned()),
            "[{\"ü ß\":\"a \\\" é\"},{\"x\":[1,2]}]"
        );
        assert_eq!(compact("[1,2]".to_owned()), "[1,2]");
        // 0045-03-15 and a year past 9999: four digits, then chrono's own form.
        assert_eq!(
            written(Cell::Date, &(-713_975i32).to_be_bytes()),
            "\"0045-03-15\""
        );
        assert!(written(Cell::Date, &3_789_000i32.to_be_bytes()).starts_with("\"+"));
    }
}
