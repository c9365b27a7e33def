//! A table as the Data API sees it: its resource, readable columns, key,
//! check messages and grants, loaded once and cached per instance.

use std::collections::BTreeMap;

use permissions::Scope;
use serde_json::Value;
use uuid::Uuid;

/// Service tables that may be exposed, with the only columns ever shown:
/// secrets (password hashes, lockout state, token hashes) never are.
pub const SERVICE_TABLES: [(&str, &[&str]); 5] = [
    (
        "users",
        &[
            "id",
            "email",
            "name",
            "email_verified",
            "active",
            "timezone",
            "created_at",
            "updated_at",
        ],
    ),
    (
        "roles",
        &[
            "id",
            "name",
            "description",
            "api_access",
            "admin_access",
            "built_in",
            "created_at",
        ],
    ),
    ("role_members", &["user_id", "role_id", "created_at"]),
    (
        "email_templates",
        &["kind", "subject", "body_text", "body_html", "updated_at"],
    ),
    (
        "files",
        &[
            "id",
            "name",
            "content_type",
            "size",
            "sha256",
            "visibility",
            "owner_id",
            "created_at",
        ],
    ),
];

/// Columns of service tables that give administrator power: written
/// through the Data API by administrators only (API.md 16).
const ADMIN_ONLY_COLUMNS: &[(&str, &str)] = &[("roles", "admin_access"), ("roles", "built_in")];

/// The schema of the service's own tables.
pub const SERVICE_SCHEMA: &str = "svc";

/// The columns of a service table the Data API may show; `None` for any other
/// service table. Application schemas show every column.
pub fn service_columns(schema: &str, table: &str) -> Option<Option<&'static [&'static str]>> {
    if schema != SERVICE_SCHEMA {
        return Some(None);
    }
    SERVICE_TABLES
        .iter()
        .find(|(name, _)| *name == table)
        .map(|(_, columns)| Some(*columns))
}

/// What values a column takes, as far as input checks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// smallint, integer, bigint.
    Integer,
    /// numeric, real, double precision.
    Number,
    /// boolean.
    Boolean,
    /// text, varchar, char and other string types.
    Text,
    /// uuid.
    Uuid,
    /// date.
    Date,
    /// timestamp without time zone.
    Timestamp,
    /// timestamp with time zone.
    TimestampTz,
    /// json.
    Json,
    /// jsonb.
    Jsonb,
    /// Any array.
    Array,
    /// Anything else: the database parses it.
    Other,
}

impl Kind {
    /// Classifies a type by its `pg_type` name and category.
    pub fn classify(type_name: &str, category: &str) -> Self {
        match (type_name, category) {
            (_, "A") => Kind::Array,
            ("int2" | "int4" | "int8", _) => Kind::Integer,
            ("numeric" | "float4" | "float8", _) => Kind::Number,
            ("bool", _) => Kind::Boolean,
            ("uuid", _) => Kind::Uuid,
            ("date", _) => Kind::Date,
            ("timestamp", _) => Kind::Timestamp,
            ("timestamptz", _) => Kind::TimestampTz,
            ("json", _) => Kind::Json,
            ("jsonb", _) => Kind::Jsonb,
            (_, "S") => Kind::Text,
            _ => Kind::Other,
        }
    }

    /// Whether a JSON value can be a value of this kind (null always can;
    /// the database has the last word on strings it parses).
    pub fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (_, Value::Null) | (Kind::Json | Kind::Jsonb | Kind::Other, _) => true,
            (Kind::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Kind::Integer, Value::String(s)) => s.trim().parse::<i64>().is_ok(),
            (Kind::Number, Value::Number(_)) => true,
            (Kind::Number, Value::String(s)) => s.trim().parse::<f64>().is_ok(),
            (Kind::Boolean, Value::Bool(_)) => true,
            (Kind::Uuid, Value::String(s)) => Uuid::parse_str(s).is_ok(),
            (Kind::Text | Kind::Date | Kind::Timestamp | Kind::TimestampTz, Value::String(_)) => {
                true
            }
            (Kind::Array, Value::Array(_)) => true,
            _ => false,
        }
    }

    /// Whether `like`/`ilike` apply.
    pub fn is_text(self) -> bool {
        self == Kind::Text
    }

    /// Whether the kind has an ordering and equality usable in filters and
    /// sorts (`json`, unlike `jsonb`, has neither).
    pub fn is_comparable(self) -> bool {
        self != Kind::Json
    }

    /// Whether `$PERIOD.*` values compare with it.
    pub fn is_temporal(self) -> bool {
        matches!(self, Kind::Date | Kind::Timestamp | Kind::TimestampTz)
    }

    /// A short name for messages and OpenAPI.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Integer => "an integer",
            Kind::Number => "a number",
            Kind::Boolean => "true or false",
            Kind::Text => "a string",
            Kind::Uuid => "a UUID string",
            Kind::Date => "a date string",
            Kind::Timestamp | Kind::TimestampTz => "a timestamp string",
            Kind::Json | Kind::Jsonb | Kind::Other => "a value of the column's type",
            Kind::Array => "an array",
        }
    }
}

/// One column the Data API may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Name, verbatim.
    pub name: String,
    /// The type as the catalog prints it (`format_type`), for casts.
    pub sql_type: String,
    /// The type without its modifier (`format_type(type, -1)`: `bpchar`,
    /// not `character(5)`): text cast to it and then written to the column
    /// takes the modifier as an assignment does, so an over-long value is
    /// refused, never cut (a CSV import's staged text).
    pub input_type: String,
    /// Input class.
    pub kind: Kind,
    /// Accepts NULL.
    pub nullable: bool,
    /// Has a default, identity or generation expression.
    pub has_default: bool,
    /// Can be written (not `GENERATED ALWAYS`).
    pub writable: bool,
}

impl Column {
    /// A nullable column without a default, writable when `writable`: a
    /// view's output column, or a column of a table built in a test.
    pub fn plain(name: &str, sql_type: &str, kind: Kind, writable: bool) -> Self {
        Self {
            name: name.to_owned(),
            sql_type: sql_type.to_owned(),
            input_type: sql_type.to_owned(),
            kind,
            nullable: true,
            has_default: false,
            writable,
        }
    }
}

/// A single-column foreign key of a table: what embeds follow (API.md 13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    /// The referencing column of this table.
    pub column: String,
    /// The referenced table's schema.
    pub schema: String,
    /// The referenced table.
    pub table: String,
    /// The referenced column.
    pub references: String,
}

/// A table registered as a resource, ready for the Data API.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its resource.
    pub resource_id: Uuid,
    /// Schema.
    pub schema: String,
    /// Table name.
    pub name: String,
    /// Methods exposed (GET, POST, PATCH, DELETE).
    pub exposed_methods: Vec<String>,
    /// Columns in table order.
    pub columns: Vec<Column>,
    /// Indices into `columns` of the primary key, in key order.
    pub key: Vec<usize>,
    /// Check constraint name to the message shown when it fails.
    pub check_messages: BTreeMap<String, String>,
    /// The grants on the resource.
    pub scopes: Vec<Scope>,
    /// Its single-column foreign keys.
    pub foreign_keys: Vec<ForeignKey>,
    /// Indices into `columns` of each unique key (primary key included,
    /// partial and expression indexes left out): what upserts conflict on.
    pub unique_keys: Vec<Vec<usize>>,
    /// Its write hooks, in slug order.
    pub hooks: Vec<crate::hooks::Hook>,
    /// The catalog version (`kernel::Versions::catalog`) it was read at.
    pub version: i64,
}

impl Table {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Whether the resource answers `method`.
    pub fn exposes(&self, method: &str) -> bool {
        self.exposed_methods.iter().any(|m| m == method)
    }

    /// Whether only administrators may write `column` (it gives
    /// administrator power).
    pub fn admin_only(&self, column: &str) -> bool {
        self.schema == SERVICE_SCHEMA && ADMIN_ONLY_COLUMNS.contains(&(self.name.as_str(), column))
    }

    /// The primary key's columns.
    pub fn key_columns(&self) -> impl Iterator<Item = &Column> {
        self.key.iter().map(|&i| &self.columns[i])
    }

    /// The foreign key of `column`, when it has a single-column one.
    pub fn foreign_key(&self, column: &str) -> Option<&ForeignKey> {
        self.foreign_keys.iter().find(|k| k.column == column)
    }

    /// Whether `columns` are exactly the columns of a unique key, in any order.
    pub fn is_unique_key(&self, columns: &[&Column]) -> bool {
        self.unique_keys.iter().any(|key| {
            key.len() == columns.len()
                && key
                    .iter()
                    .all(|&i| columns.iter().any(|c| c.name == self.columns[i].name))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kinds_accept_their_values() {
        assert!(Kind::Integer.accepts(&json!(5)));
        assert!(Kind::Integer.accepts(&json!("42")));
        assert!(!Kind::Integer.accepts(&json!(1.5)));
        assert!(!Kind::Integer.accepts(&json!("x")));
        assert!(Kind::Uuid.accepts(&json!("0193b3a8-7f4e-7000-8000-000000000001")));
        assert!(!Kind::Uuid.accepts(&json!("nope")));
        assert!(!Kind::Text.accepts(&json!(3)));
        assert!(Kind::Text.accepts(&json!(null)));
        assert!(Kind::Jsonb.accepts(&json!({ "a": [1] })));
        assert_eq!(Kind::classify("_text", "A"), Kind::Array);
        assert_eq!(Kind::classify("varchar", "S"), Kind::Text);
        assert_eq!(service_columns("svc", "sessions"), None);
        assert!(
            service_columns("svc", "users")
                .is_some_and(|c| c.is_some_and(|c| !c.contains(&"password_hash")))
        );
        assert_eq!(service_columns("app", "anything"), Some(None));
    }
}
