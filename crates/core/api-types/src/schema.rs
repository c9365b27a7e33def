//! Tables, resources and grants.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// A foreign key of a column definition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForeignKeyDefinition {
    /// Schema of the target table (default: the new table's schema).
    pub target_schema: Option<String>,
    /// Target table.
    pub target_table: String,
    /// Target column: a primary or unique key.
    pub target_column: String,
    /// RESTRICT, CASCADE, SET NULL, SET DEFAULT or NO ACTION (default).
    pub on_delete: Option<String>,
}

/// One column of a table definition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDefinition {
    /// Column name: a-z, 0-9 and _, at most 63 characters.
    pub name: String,
    /// A PostgreSQL type name, with optional modifiers and `[]`.
    pub data_type: String,
    /// Whether it is the primary key (one per table).
    #[serde(default)]
    pub primary_key: bool,
    /// Default: one scalar expression.
    pub default: Option<String>,
    /// `ALWAYS` for an identity column.
    pub identity: Option<String>,
    /// Whether NULL is allowed (default true, false for keys and identities).
    pub nullable: Option<bool>,
    /// Reference to another table.
    pub foreign_key: Option<ForeignKeyDefinition>,
    /// CHECK condition over this table's columns.
    pub check: Option<String>,
    /// Message shown when the check fails.
    pub check_message: Option<String>,
    /// Whether values are unique (a UNIQUE constraint).
    #[serde(default)]
    pub unique: bool,
}

/// A field that may be absent (kept), `null` (removed) or a value.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `PATCH …/columns/{column}` body: each field absent is kept.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ColumnChangeRequest {
    /// New name.
    pub name: Option<String>,
    /// New type; existing values are converted (`USING col::type`).
    pub data_type: Option<String>,
    /// Whether NULL is allowed.
    pub nullable: Option<bool>,
    /// Default expression; `null` drops the default.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub default: Option<Option<String>>,
    /// CHECK condition replacing the column's; `null` drops it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub check: Option<Option<String>>,
    /// Message of a CHECK violation; `null` drops it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub check_message: Option<Option<String>>,
    /// Whether values are unique.
    pub unique: Option<bool>,
}

/// `PATCH …/tables/{table}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TableRenameRequest {
    /// The new name.
    pub name: String,
}

/// `POST …/indexes` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexDefinition {
    /// Name (default `<table>_<col1>_<col2>…_idx`).
    pub name: Option<String>,
    /// Column names, `-name` for descending.
    pub columns: Vec<String>,
    /// Whether values are unique.
    #[serde(default)]
    pub unique: bool,
    /// btree (default), hash, gin, gist, brin or search.
    pub method: Option<String>,
    /// A filter of the Data API without variables: a partial index.
    #[serde(rename = "where")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Value>,
}

/// An index as the catalog describes it.
#[derive(Debug, Serialize, ToSchema)]
pub struct IndexInfo {
    /// Index name.
    pub name: String,
    /// Column names, `-name` for descending.
    pub columns: Vec<String>,
    /// Whether values are unique.
    pub unique: bool,
    /// btree, hash, gin, gist, brin or search.
    pub method: String,
    /// The partial index's filter, or null (SQL text for an index made
    /// outside Tessera).
    #[serde(rename = "where")]
    #[schema(value_type = Value)]
    pub filter: Value,
    /// False while a build is under way or after one failed.
    pub valid: bool,
}

/// A table definition.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TableDefinition {
    /// Table name.
    pub name: String,
    /// Its columns.
    pub columns: Vec<ColumnDefinition>,
}

/// A table just created or changed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableCreated {
    /// Its resource.
    pub resource_id: Uuid,
    /// Table name.
    pub name: String,
    /// Schema.
    pub schema: String,
}

/// The SQL a create would run.
#[derive(Debug, Serialize, ToSchema)]
pub struct TablePreview {
    /// Statements, each ending with `;`.
    pub sql: String,
}

/// A table as the catalog describes it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableInfo {
    /// Table name.
    pub name: String,
    /// Its resource, when registered.
    pub resource_id: Option<Uuid>,
    /// Columns: name, dataType, nullable, default, identity, primaryKey, unique, check, checkMessage, foreignKey.
    pub columns: Value,
    /// Indexes `{ name, columns, unique, method, where, valid }`, the primary key's included.
    #[schema(value_type = Vec<IndexInfo>)]
    pub indexes: Value,
    /// Its foreign keys `{ column, targetSchema, targetTable, targetColumn, onDelete }`.
    pub foreign_keys: Value,
    /// Other tables' foreign keys on it: as `foreignKeys` plus `schema` and `table`.
    pub referenced_by: Value,
}

/// A table registered for the Data API.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Resource id.
    pub id: Uuid,
    /// Always `table`.
    #[schema(example = "table")]
    pub kind: &'static str,
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
    /// Methods the Data API answers for it; empty: hidden.
    pub exposed_methods: Vec<String>,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// An input argument of a registered function.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionArgument {
    /// Its name: calls pass arguments by name.
    pub name: String,
    /// Its PostgreSQL type.
    #[serde(rename = "type")]
    pub data_type: String,
    /// Whether a call may leave it out.
    pub has_default: bool,
}

/// What a registered function returns.
#[derive(Debug, Serialize, ToSchema)]
pub struct FunctionReturns {
    /// Its PostgreSQL type (`void` for nothing).
    #[serde(rename = "type")]
    pub data_type: String,
    /// Whether it returns a set (`SETOF`, `TABLE`).
    pub set: bool,
}

/// A database function registered for the Data API (`POST /api/rpc/{schema}/{function}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResource {
    /// Resource id.
    pub id: Uuid,
    /// Always `function`.
    #[schema(example = "function")]
    pub kind: &'static str,
    /// Schema.
    pub schema: String,
    /// The function.
    pub function: String,
    /// Its input arguments, as the database has them now.
    pub arguments: Vec<FunctionArgument>,
    /// Its result.
    pub returns: Option<FunctionReturns>,
    /// `immutable`, `stable` or `volatile`; null when the function is gone.
    pub volatility: Option<String>,
    /// Methods the Data API answers for it (POST, and GET when it reads only); empty: hidden.
    pub exposed_methods: Vec<String>,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// A resource of either kind.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ResourceEntry {
    /// A table.
    Table(Resource),
    /// A database function.
    Function(FunctionResource),
}

/// `POST /admin/api/resources` body: a table or a function.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RegisterResourceRequest {
    /// Schema of an existing table or function.
    pub schema: String,
    /// The table.
    #[serde(default)]
    pub table: Option<String>,
    /// The function (one of its name: no overloads).
    #[serde(default)]
    pub function: Option<String>,
}

/// `PATCH /admin/api/resources/{id}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExposeRequest {
    /// A subset of GET, POST, PATCH, DELETE.
    pub exposed_methods: Vec<String>,
}

/// `POST /admin/api/grants` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateGrantRequest {
    /// The role it is given to.
    pub role_id: Uuid,
    /// The resource (for read, create, update, delete).
    pub resource_id: Option<Uuid>,
    /// The workflow (for invoke).
    pub workflow_id: Option<Uuid>,
    /// The DataView (for read; the filter is over its output columns).
    pub data_view_id: Option<Uuid>,
    /// `read`, `create`, `update`, `delete` or `invoke`.
    pub action: String,
    /// Row filter in the filter language; omitted: all rows.
    pub filter: Option<Value>,
    /// Columns covered; omitted: all.
    pub columns: Option<Vec<String>>,
}

/// A grant.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// Grant id.
    pub id: Uuid,
    /// The role.
    pub role_id: Uuid,
    /// The resource.
    pub resource_id: Option<Uuid>,
    /// The workflow.
    pub workflow_id: Option<Uuid>,
    /// The DataView.
    pub data_view_id: Option<Uuid>,
    /// What it allows.
    pub action: String,
    /// Row filter.
    pub filter: Option<Value>,
    /// Columns covered.
    pub columns: Option<Vec<String>>,
}

/// Query of `GET /admin/api/grants`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct GrantListQuery {
    /// Only this role's grants.
    pub role_id: Option<Uuid>,
    /// Only grants on this resource.
    pub resource_id: Option<Uuid>,
}

/// `POST /admin/api/snapshot/apply` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotApplyRequest {
    /// The snapshot, as `GET /admin/api/snapshot` answers it.
    #[schema(value_type = Object)]
    pub snapshot: Value,
    /// Runs steps that drop a table, a column, a role, a grant or a
    /// workflow, or change a type; without it they are refused (409).
    #[serde(default)]
    pub allow_destructive: bool,
    /// Runs steps that give administrator power (a setting naming a role
    /// with admin access, a workflow whose runs can act as an
    /// administrator, svc.roles or svc.role_members exposed for a write); without
    /// it they are refused (400, `field` naming the step).
    #[serde(default)]
    pub allow_admin_power: bool,
}

/// One change of a snapshot's diff or apply.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotStep {
    /// create, alter or drop.
    pub action: String,
    /// table, column, index, resource, role, grant, workflow, dataview, dashboard or setting.
    pub kind: String,
    /// What it changes, by name.
    pub name: String,
    /// The SQL of a schema step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// A setting's value before the step (secrets `"[REDACTED]"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub old: Option<Value>,
    /// A setting's value after the step (secrets `"[REDACTED]"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub new: Option<Value>,
    /// The step gives administrator power; apply needs `allowAdminPower`.
    #[serde(rename = "adminPower", skip_serializing_if = "std::ops::Not::not")]
    pub admin_power: bool,
    /// Why the step gives administrator power (with `adminPower`).
    #[serde(rename = "adminPowerReason", skip_serializing_if = "Option::is_none")]
    pub admin_power_reason: Option<String>,
}

/// What `POST /admin/api/snapshot/diff` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotDiff {
    /// The steps, in the order they would run.
    pub steps: Vec<SnapshotStep>,
    /// Whether one of them drops a table, a column, a role, a grant or a
    /// workflow, or changes a type.
    pub destructive: bool,
}

/// What `POST /admin/api/snapshot/apply` answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotApplied {
    /// The steps that ran, in order.
    pub steps: Vec<SnapshotStep>,
}
