//! The SQL console.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A statement for the SQL console.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SqlQuery {
    /// Exactly one SQL statement; `$1`, `$2`, ... are the parameters.
    pub query: String,
    /// Values of the parameters, in order (bound, never spliced into the text).
    #[serde(default)]
    pub params: Vec<Value>,
    /// Run it in a READ ONLY transaction.
    #[serde(default)]
    pub read_only: bool,
}

/// A result column of the SQL console.
#[derive(Debug, Serialize, ToSchema)]
pub struct SqlColumn {
    /// The column's name (names may repeat).
    pub name: String,
    /// PostgreSQL's name of its type, such as `int4` or `text[]`.
    #[serde(rename = "type")]
    pub type_name: String,
}

/// What a statement of the SQL console answered.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SqlResult {
    /// The result columns, in order.
    pub columns: Vec<SqlColumn>,
    /// The rows, each an array in the order of `columns` (at most 1000).
    pub rows: Vec<Vec<Value>>,
    /// Rows returned (all, even past the cap) or, for a command, rows changed.
    pub row_count: u64,
    /// Milliseconds the statement took.
    pub duration_ms: f64,
}

/// The `meta` of a SQL console answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct SqlMeta {
    /// Rows were left out of `rows` (past 1000 rows or 8 MiB).
    pub truncated: bool,
}
