//! The snapshot document (API.md section 12): names, never ids, sorted so
//! that two exports of one state are byte-identical.

use std::collections::BTreeMap;

use kernel::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only snapshot version there is.
pub const VERSION: u32 = 1;

/// A configuration: tables, exposure, registered functions, roles, grants,
/// workflows, DataViews, dashboards and settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Always 1.
    pub version: u32,
    /// Tables of application schemas that are resources.
    #[serde(default)]
    pub tables: Vec<Table>,
    /// Every resource with its exposure.
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// Database functions registered as resources, with their exposure
    /// (the functions themselves are the database's, not the snapshot's).
    #[serde(default)]
    pub functions: Vec<Function>,
    /// Roles that are not built in.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// Grants, by role name and target name.
    #[serde(default)]
    pub grants: Vec<Grant>,
    /// Workflows by slug.
    #[serde(default)]
    pub workflows: Vec<Workflow>,
    /// DataViews by slug.
    #[serde(default)]
    pub dataviews: Vec<DataView>,
    /// Dashboards by slug, widgets naming views by slug.
    #[serde(default)]
    pub dashboards: Vec<Dashboard>,
    /// Settings but secrets.
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
}

/// A table with its columns and indexes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// Schema.
    pub schema: String,
    /// Name.
    pub name: String,
    /// Columns in order.
    pub columns: Vec<Column>,
    /// Indexes but those of the primary key and unique columns.
    #[serde(default)]
    pub indexes: Vec<Index>,
}

impl Table {
    /// `schema.name`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

/// A column as the catalog describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Column {
    /// Name.
    pub name: String,
    /// Type.
    pub data_type: String,
    /// Whether NULL is allowed.
    #[serde(default = "yes")]
    pub nullable: bool,
    /// Default expression.
    #[serde(default)]
    pub default: Option<String>,
    /// `ALWAYS` for an identity column.
    #[serde(default)]
    pub identity: Option<String>,
    /// Whether it is the primary key.
    #[serde(default)]
    pub primary_key: bool,
    /// Whether values are unique.
    #[serde(default)]
    pub unique: bool,
    /// CHECK condition.
    #[serde(default)]
    pub check: Option<String>,
    /// Message of a CHECK violation.
    #[serde(default)]
    pub check_message: Option<String>,
    /// Reference to another table.
    #[serde(default)]
    pub foreign_key: Option<ForeignKey>,
}

fn yes() -> bool {
    true
}

/// A column's foreign key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForeignKey {
    /// Schema of the target.
    pub target_schema: String,
    /// Target table.
    pub target_table: String,
    /// Target column.
    pub target_column: String,
    /// What a delete of the target does.
    pub on_delete: String,
}

/// An index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// Name.
    pub name: String,
    /// Columns, `-name` for descending.
    pub columns: Vec<String>,
    /// Whether values are unique.
    #[serde(default)]
    pub unique: bool,
    /// Method.
    #[serde(default = "btree")]
    pub method: String,
    /// A partial index's filter.
    #[serde(default, rename = "where")]
    pub filter: Option<Value>,
}

fn btree() -> String {
    "btree".into()
}

/// A resource's exposure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
    /// Methods the Data API answers.
    #[serde(default)]
    pub exposed_methods: Vec<String>,
}

impl Resource {
    /// `schema.table`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// A registered database function's exposure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Function {
    /// Schema.
    pub schema: String,
    /// The function's name.
    pub function: String,
    /// Methods the Data API answers (GET, POST).
    #[serde(default)]
    pub exposed_methods: Vec<String>,
}

impl Function {
    /// `schema.function`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.function)
    }
}

/// A role that is not built in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Role {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether its members may use the Data API.
    #[serde(default = "yes")]
    pub api_access: bool,
}

/// A grant, naming its role and target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    /// Role name.
    pub role: String,
    /// A table as `schema.table`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// A workflow slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// A DataView slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_view: Option<String>,
    /// A registered function as `schema.function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// read, create, update, delete or invoke.
    pub action: String,
    /// Row filter.
    #[serde(default)]
    pub filter: Option<Value>,
    /// Columns covered.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
}

impl Grant {
    /// The target as a step names it.
    pub fn target(&self) -> String {
        match (
            &self.resource,
            &self.workflow,
            &self.data_view,
            &self.function,
        ) {
            (Some(r), ..) => r.clone(),
            (None, Some(w), ..) => format!("workflow {w}"),
            (None, None, Some(v), _) => format!("DataView {v}"),
            (None, None, None, Some(f)) => format!("function {f}"),
            _ => String::new(),
        }
    }

    /// A total order key: role, target, action, then the rest.
    fn key(&self) -> (String, String, String, String) {
        let rest = serde_json::to_string(&(&self.filter, &self.columns)).unwrap_or_default();
        (
            self.role.to_lowercase(),
            self.target(),
            self.action.clone(),
            rest,
        )
    }
}

/// A workflow: its draft and published definitions, with users by email and
/// tables by `schema.table`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// Slug.
    pub slug: String,
    /// Name.
    pub name: String,
    /// Whether it runs.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `{ trigger, steps }` being edited.
    pub draft: Value,
    /// `{ trigger, steps }` that runs; null before the first publish.
    #[serde(default)]
    pub published: Option<Value>,
}

/// A DataView: its draft and published definitions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataView {
    /// Slug.
    pub slug: String,
    /// Name.
    pub name: String,
    /// The definition being edited.
    pub draft: Value,
    /// What is served; null before the first publish.
    #[serde(default)]
    pub published: Option<Value>,
}

/// A dashboard; each widget names its view by slug (`dataView`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dashboard {
    /// Slug.
    pub slug: String,
    /// Name.
    pub name: String,
    /// Seconds between refreshes.
    #[serde(default)]
    pub refresh_seconds: Option<i64>,
    /// Widgets.
    #[serde(default)]
    pub widgets: Vec<Value>,
}

/// What a snapshot names by slug.
pub trait Slugged {
    /// The slug.
    fn slug(&self) -> &str;
}

macro_rules! slugged {
    ($($kind:ty),*) => {
        $(impl Slugged for $kind {
            fn slug(&self) -> &str {
                &self.slug
            }
        })*
    };
}

slugged!(Workflow, DataView, Dashboard);

impl Snapshot {
    /// Parses a submitted snapshot: its version first, then its shape. The
    /// lists keep the submitted order, so that a refusal's path (such as
    /// `grants[3].role`) points into the document as sent.
    pub fn parse(value: &Value) -> Result<Self, FieldError> {
        match value.get("version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(VERSION) => {}
            _ => return Err(FieldError::new("version", "must be 1")),
        }
        serde_json::from_value(value.clone())
            .map_err(|e| FieldError::new("snapshot", e.to_string()))
    }

    /// Puts every list in its canonical order.
    pub fn sort(&mut self) {
        self.tables
            .sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        for t in &mut self.tables {
            t.indexes.sort_by(|a, b| a.name.cmp(&b.name));
        }
        self.resources
            .sort_by(|a, b| (&a.schema, &a.table).cmp(&(&b.schema, &b.table)));
        self.functions
            .sort_by(|a, b| (&a.schema, &a.function).cmp(&(&b.schema, &b.function)));
        self.roles
            .sort_by_key(|r| (r.name.to_lowercase(), r.name.clone()));
        self.grants.sort_by_key(Grant::key);
        self.workflows.sort_by(|a, b| a.slug.cmp(&b.slug));
        self.dataviews.sort_by(|a, b| a.slug.cmp(&b.slug));
        self.dashboards.sort_by(|a, b| a.slug.cmp(&b.slug));
    }

    /// The snapshot as JSON with every object's keys sorted.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_is_checked_first_and_lists_come_out_sorted() {
        assert_eq!(
            Snapshot::parse(&json!({ "version": 2 })).unwrap_err().field,
            "version"
        );
        assert_eq!(Snapshot::parse(&json!({})).unwrap_err().field, "version");
        assert_eq!(
            Snapshot::parse(&json!({ "version": 1, "extra": 1 }))
                .unwrap_err()
                .field,
            "snapshot"
        );
        let parsed = Snapshot::parse(&json!({ "version": 1,
            "roles": [{ "name": "b" }, { "name": "A" }],
            "grants": [{ "role": "b", "resource": "public.x", "action": "read" },
                       { "role": "a", "resource": "public.x", "action": "read" }] }))
        .unwrap();
        assert_eq!(parsed.roles[0].name, "b", "the submitted order, for paths");
        let mut sorted = parsed.clone();
        sorted.sort();
        assert_eq!(sorted.roles[0].name, "A");
        assert_eq!(sorted.grants[0].role, "a");
    }
}
