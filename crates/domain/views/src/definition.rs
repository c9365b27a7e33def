//! A DataView's definition: its source, output columns (plain, aggregate or
//! time bucket), filter, sort and limit; parsed from JSON and checked
//! against the source table.

use data::{Column, Kind, Table};
use kernel::FieldError;
use kernel::filter::Filter;
use permissions::Access;
use serde_json::{Map, Value, json};

/// Most output columns of a view.
const COLUMNS_MAX: usize = 50;
/// Largest `limit` of a view: the rows it yields at most.
pub const VIEW_LIMIT_MAX: u32 = 1_000_000;

/// An aggregate over the source's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    /// Rows, or non-null values of a column.
    Count,
    /// Sum of a numeric column.
    Sum,
    /// Average of a numeric column.
    Avg,
    /// Least value of an orderable column.
    Min,
    /// Greatest value of an orderable column.
    Max,
}

impl Agg {
    const NAMES: [(&'static str, Agg); 5] = [
        ("count", Agg::Count),
        ("sum", Agg::Sum),
        ("avg", Agg::Avg),
        ("min", Agg::Min),
        ("max", Agg::Max),
    ];

    /// The SQL function.
    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, a)| *a == self)
            .map_or("count", |(n, _)| n)
    }
}

/// A time bucket: the start of the hour, day, ISO week (Monday), month or
/// year holding a value, cut in the caller's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// Start of the hour.
    Hour,
    /// Start of the day.
    Day,
    /// Monday of the ISO week.
    Week,
    /// First day of the month.
    Month,
    /// First day of the year.
    Year,
}

impl Bucket {
    const NAMES: [(&'static str, Bucket); 5] = [
        ("hour", Bucket::Hour),
        ("day", Bucket::Day),
        ("week", Bucket::Week),
        ("month", Bucket::Month),
        ("year", Bucket::Year),
    ];

    /// The `date_trunc` unit.
    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("day", |(n, _)| n)
    }
}

/// How an output column is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measure {
    /// A source column, grouped by.
    Plain(String),
    /// A time bucket of a source column, grouped by.
    Bucket(Bucket, String),
    /// An aggregate; `count` may have no column (rows).
    Agg(Agg, Option<String>),
}

impl Measure {
    /// Whether the column is one of the groups.
    pub fn groups(&self) -> bool {
        !matches!(self, Measure::Agg(..))
    }
}

/// An output column.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewColumn {
    /// Its name in the answer.
    pub name: String,
    /// What it holds.
    pub measure: Measure,
}

/// A DataView's query.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// Schema of the source table.
    pub schema: String,
    /// Name of the source table.
    pub table: String,
    /// Output columns, in order.
    pub columns: Vec<ViewColumn>,
    /// Rows of the source it reads, as given.
    pub filter_json: Option<Value>,
    /// The same, parsed.
    pub filter: Option<Filter>,
    /// Output columns to sort by, descending when true.
    pub sort: Vec<(String, bool)>,
    /// Rows it yields at most.
    pub limit: Option<u32>,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(field.into(), message.into())
}

/// Whether `name` is a plain identifier (letters, digits, `_`; not a digit first).
fn identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 63
}

impl Definition {
    /// Parses the definition fields of `body` (`source`, `columns`,
    /// `filter`, `sort`, `limit`); other keys are left to the caller.
    pub fn parse(body: &Map<String, Value>) -> Result<Self, FieldError> {
        let source = body
            .get("source")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("source", "must be a table as schema.table"))?;
        let (schema, table) = source
            .split_once('.')
            .filter(|(s, t)| !s.is_empty() && !t.is_empty() && !t.contains('.'))
            .ok_or_else(|| invalid("source", "must be a table as schema.table"))?;
        let items = body
            .get("columns")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("columns", "must be an array of columns"))?;
        if items.is_empty() || items.len() > COLUMNS_MAX {
            return Err(invalid(
                "columns",
                format!("must hold from 1 to {COLUMNS_MAX} columns"),
            ));
        }
        let mut columns: Vec<ViewColumn> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let column = parse_column(item, &format!("columns[{i}]"))?;
            if columns.iter().any(|c| c.name == column.name) {
                return Err(invalid(
                    format!("columns[{i}].name"),
                    format!("{} is the name of an earlier column", column.name),
                ));
            }
            columns.push(column);
        }
        let filter_json = body.get("filter").filter(|v| !v.is_null()).cloned();
        let filter = filter_json
            .as_ref()
            .map(|f| Filter::parse(f, "filter"))
            .transpose()?;
        let sort = match body.get("sort") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(keys)) => keys
                .iter()
                .enumerate()
                .map(|(i, key)| {
                    let text = key.as_str().unwrap_or_default();
                    let (name, descending) = match text.strip_prefix('-') {
                        Some(name) => (name, true),
                        None => (text, false),
                    };
                    if columns.iter().any(|c| c.name == name) {
                        Ok((name.to_owned(), descending))
                    } else {
                        Err(invalid(
                            format!("sort[{i}]"),
                            "must name an output column (-name for descending)",
                        ))
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid("sort", "must be an array of output column names")),
        };
        let limit = match body.get("limit") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|n| (1..=u64::from(VIEW_LIMIT_MAX)).contains(n))
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        invalid(
                            "limit",
                            format!("must be a whole number from 1 to {VIEW_LIMIT_MAX}"),
                        )
                    })?,
            ),
        };
        Ok(Self {
            schema: schema.to_owned(),
            table: table.to_owned(),
            columns,
            filter_json,
            filter,
            sort,
            limit,
        })
    }

    /// The definition as stored and shown.
    pub fn to_json(&self) -> Value {
        let columns: Vec<Value> = self
            .columns
            .iter()
            .map(|c| match &c.measure {
                Measure::Plain(column) => json!({ "name": c.name, "column": column }),
                Measure::Bucket(b, column) => {
                    json!({ "name": c.name, "bucket": b.as_str(), "column": column })
                }
                Measure::Agg(a, Some(column)) => {
                    json!({ "name": c.name, "agg": a.as_str(), "column": column })
                }
                Measure::Agg(a, None) => json!({ "name": c.name, "agg": a.as_str() }),
            })
            .collect();
        let sort: Vec<String> = self
            .sort
            .iter()
            .map(|(name, descending)| {
                if *descending {
                    format!("-{name}")
                } else {
                    name.clone()
                }
            })
            .collect();
        json!({
            "source": format!("{}.{}", self.schema, self.table),
            "columns": columns,
            "filter": self.filter_json,
            "sort": sort,
            "limit": self.limit,
        })
    }

    /// Checks the definition against its source and answers the output as a
    /// table: each output column's type, the groups as its key (so pages
    /// sort stably).
    pub fn shape(&self, source: &Table) -> Result<Table, FieldError> {
        let mut columns = Vec::with_capacity(self.columns.len());
        let mut key = Vec::new();
        for (i, view_column) in self.columns.iter().enumerate() {
            let field = |part: &str| format!("columns[{i}].{part}");
            let of = |name: &str| {
                source.column(name).ok_or_else(|| {
                    invalid(
                        field("column"),
                        format!("{name} is not a column of {}.{}", self.schema, self.table),
                    )
                })
            };
            let (sql_type, kind) = match &view_column.measure {
                Measure::Plain(name) => {
                    let column = of(name)?;
                    if !column.kind.is_comparable() {
                        return Err(invalid(field("column"), "json columns cannot be grouped by"));
                    }
                    (column.sql_type.clone(), column.kind)
                }
                Measure::Bucket(bucket, name) => bucket_type(*bucket, of(name)?)
                    .ok_or_else(|| {
                        invalid(
                            field("bucket"),
                            match bucket {
                                Bucket::Hour => {
                                    "hour buckets need a timestamp column".to_owned()
                                }
                                _ => format!(
                                    "{name} is not a date or timestamp column, so it has no {} buckets",
                                    bucket.as_str()
                                ),
                            },
                        )
                    })?,
                Measure::Agg(Agg::Count, None) => ("bigint".to_owned(), Kind::Integer),
                Measure::Agg(Agg::Count, Some(name)) => {
                    of(name)?;
                    ("bigint".to_owned(), Kind::Integer)
                }
                Measure::Agg(agg, Some(name)) => {
                    agg_type(*agg, of(name)?).ok_or_else(|| {
                        invalid(
                            field("agg"),
                            match agg {
                                Agg::Sum | Agg::Avg => format!(
                                    "{} needs a numeric column; {name} is not one",
                                    agg.as_str()
                                ),
                                _ => format!(
                                    "{} needs a number, text, date or timestamp column; {name} is not one",
                                    agg.as_str()
                                ),
                            },
                        )
                    })?
                }
                Measure::Agg(agg, None) => {
                    return Err(invalid(
                        field("column"),
                        format!("{} needs a column", agg.as_str()),
                    ));
                }
            };
            if view_column.measure.groups() {
                key.push(i);
            }
            columns.push(Column::plain(&view_column.name, &sql_type, kind, false));
        }
        if let Some(filter) = &self.filter {
            data::check_filter(source, &Access::All, filter).map_err(|e| match e {
                data::DataError::Query(e) => invalid("filter", e.message),
                other => invalid("filter", other.to_string()),
            })?;
        }
        Ok(Table {
            resource_id: uuid::Uuid::nil(),
            schema: self.schema.clone(),
            name: self.table.clone(),
            exposed_methods: Vec::new(),
            columns,
            key,
            check_messages: Default::default(),
            foreign_keys: Vec::new(),
            unique_keys: Vec::new(),
            hooks: Vec::new(),
            scopes: Vec::new(),
            version: source.version,
        })
    }
}

fn parse_column(item: &Value, path: &str) -> Result<ViewColumn, FieldError> {
    let object = item.as_object().ok_or_else(|| {
        invalid(
            path,
            "must be an object with name and column, agg or bucket",
        )
    })?;
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "name" | "column" | "agg" | "bucket"))
    {
        return Err(invalid(
            format!("{path}.{key}"),
            "is not a field of a column",
        ));
    }
    let text = |key: &str| -> Result<Option<&str>, FieldError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(invalid(format!("{path}.{key}"), "must be a string")),
        }
    };
    let name = text("name")?.filter(|n| identifier(n)).ok_or_else(|| {
        invalid(
            format!("{path}.name"),
            "must be a name of letters, digits and _ (up to 63, not starting with a digit)",
        )
    })?;
    let column = text("column")?.map(str::to_owned);
    let measure = match (text("agg")?, text("bucket")?) {
        (Some(_), Some(_)) => {
            return Err(invalid(path, "give either agg or bucket, not both"));
        }
        (Some(agg), None) => {
            let agg = Agg::NAMES
                .iter()
                .find(|(n, _)| *n == agg)
                .map(|(_, a)| *a)
                .ok_or_else(|| {
                    invalid(format!("{path}.agg"), "must be count, sum, avg, min or max")
                })?;
            Measure::Agg(agg, column)
        }
        (None, Some(bucket)) => {
            let bucket = Bucket::NAMES
                .iter()
                .find(|(n, _)| *n == bucket)
                .map(|(_, b)| *b)
                .ok_or_else(|| {
                    invalid(
                        format!("{path}.bucket"),
                        "must be hour, day, week, month or year",
                    )
                })?;
            Measure::Bucket(
                bucket,
                column.ok_or_else(|| invalid(format!("{path}.column"), "is required"))?,
            )
        }
        (None, None) => {
            Measure::Plain(column.ok_or_else(|| invalid(format!("{path}.column"), "is required"))?)
        }
    };
    Ok(ViewColumn {
        name: name.to_owned(),
        measure,
    })
}

/// The type of a bucket of `column`; `None` when it has no such buckets.
fn bucket_type(bucket: Bucket, column: &Column) -> Option<(String, Kind)> {
    match column.kind {
        Kind::TimestampTz | Kind::Timestamp => Some((column.sql_type.clone(), column.kind)),
        Kind::Date if bucket != Bucket::Hour => Some(("date".to_owned(), Kind::Date)),
        _ => None,
    }
}

/// The type PostgreSQL gives `agg` over `column`; `None` when it does not apply.
fn agg_type(agg: Agg, column: &Column) -> Option<(String, Kind)> {
    let numeric = || ("numeric".to_owned(), Kind::Number);
    let float = column.sql_type == "real" || column.sql_type == "double precision";
    match (agg, column.kind) {
        (Agg::Count, _) => Some(("bigint".to_owned(), Kind::Integer)),
        (Agg::Sum, Kind::Integer) if column.sql_type == "bigint" => Some(numeric()),
        (Agg::Sum, Kind::Integer) => Some(("bigint".to_owned(), Kind::Integer)),
        (Agg::Sum, Kind::Number) if float => Some((column.sql_type.clone(), Kind::Number)),
        (Agg::Avg, Kind::Number) if float => Some(("double precision".to_owned(), Kind::Number)),
        (Agg::Sum | Agg::Avg, Kind::Integer | Kind::Number) => Some(numeric()),
        (
            Agg::Min | Agg::Max,
            Kind::Integer
            | Kind::Number
            | Kind::Text
            | Kind::Date
            | Kind::Timestamp
            | Kind::TimestampTz,
        ) => Some((column.sql_type.clone(), column.kind)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn column(name: &str, sql_type: &str, kind: Kind) -> Column {
        Column::plain(name, sql_type, kind, true)
    }

    fn orders() -> Table {
        Table {
            resource_id: uuid::Uuid::nil(),
            schema: "public".into(),
            name: "orders".into(),
            exposed_methods: Vec::new(),
            columns: vec![
                column("id", "bigint", Kind::Integer),
                column("amount", "numeric(10,2)", Kind::Number),
                column("qty", "integer", Kind::Integer),
                column("team", "text", Kind::Text),
                column("paid", "boolean", Kind::Boolean),
                column("created_at", "timestamp with time zone", Kind::TimestampTz),
                column("due", "date", Kind::Date),
            ],
            key: vec![0],
            check_messages: BTreeMap::new(),
            foreign_keys: Vec::new(),
            unique_keys: Vec::new(),
            hooks: Vec::new(),
            scopes: Vec::new(),
            version: 3,
        }
    }

    fn parse(value: Value) -> Result<Definition, FieldError> {
        Definition::parse(value.as_object().unwrap())
    }

    fn error_of(value: Value) -> (String, String) {
        let result = parse(value).and_then(|d| d.shape(&orders()));
        let e = result.unwrap_err();
        (e.field.to_string(), e.message.to_string())
    }

    #[test]
    fn a_definition_round_trips_and_has_typed_outputs() {
        let body = json!({ "source": "public.orders",
            "columns": [ { "name": "day", "bucket": "day", "column": "created_at" },
                         { "name": "team", "column": "team" },
                         { "name": "total", "agg": "sum", "column": "amount" },
                         { "name": "units", "agg": "sum", "column": "qty" },
                         { "name": "mean", "agg": "avg", "column": "qty" },
                         { "name": "first", "agg": "min", "column": "due" },
                         { "name": "n", "agg": "count" } ],
            "filter": { "created_at": { "gte": "$PERIOD.startOfMonth" } },
            "sort": ["-day"], "limit": 1000 });
        let definition = parse(body.clone()).unwrap();
        assert_eq!(definition.to_json(), body);
        let shape = definition.shape(&orders()).unwrap();
        let types: Vec<&str> = shape.columns.iter().map(|c| c.sql_type.as_str()).collect();
        assert_eq!(
            types,
            [
                "timestamp with time zone",
                "text",
                "numeric",
                "bigint",
                "numeric",
                "date",
                "bigint"
            ]
        );
        assert_eq!(shape.key, vec![0, 1]);
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            (json!({ "source": "orders", "columns": [] }), "source"),
            (
                json!({ "source": "public.orders", "columns": [] }),
                "columns",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "x", "column": "nope" } ] }),
                "columns[0].column",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "t", "agg": "sum", "column": "team" } ] }),
                "columns[0].agg",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "t", "agg": "max", "column": "paid" } ] }),
                "columns[0].agg",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "t", "bucket": "day", "column": "team" } ] }),
                "columns[0].bucket",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "t", "bucket": "hour", "column": "due" } ] }),
                "columns[0].bucket",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "t", "agg": "median", "column": "qty" } ] }),
                "columns[0].agg",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "count" }, { "name": "n", "column": "team" } ] }),
                "columns[1].name",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "bad name", "agg": "count" } ] }),
                "columns[0].name",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "sum" } ] }),
                "columns[0].column",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "count" } ], "sort": ["x"] }),
                "sort[0]",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "count" } ], "limit": 0 }),
                "limit",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "count" } ], "filter": { "nope": { "eq": 1 } } }),
                "filter",
            ),
            (
                json!({ "source": "public.orders", "columns": [ { "name": "n", "agg": "count" } ], "filter": { "team": { "gte": "$PERIOD.today" } } }),
                "filter",
            ),
        ];
        for (body, field) in cases {
            assert_eq!(error_of(body.clone()).0, field, "{body}");
        }
    }
}
