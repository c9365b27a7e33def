//! Wire types of the HTTP API: request and response bodies with their OpenAPI
//! schemas. No logic lives here.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

/// Deserializes a field that may be absent (outer `None`), null (`Some(None)`) or set.
pub fn double_option<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A successful answer: `{ "data": ... }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataEnvelope<T> {
    /// The payload.
    pub data: T,
}

/// A request body: `{ "data": ... }`.
#[derive(Debug, Deserialize)]
pub struct DataBody<T> {
    /// The payload.
    pub data: T,
}

/// A list with paging facts: `{ "data": [...], "meta": { "total": n } }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PagedEnvelope<T> {
    /// The items of the page.
    pub data: Vec<T>,
    /// Paging facts.
    pub meta: PageMeta,
}

/// Paging facts of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageMeta {
    /// Items matching, over all pages.
    pub total: u64,
}

/// Paging facts of a page of Data API rows.
#[derive(Debug, Serialize, ToSchema)]
pub struct RowsMeta {
    /// The page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Rows matching, over all pages (with `count=exact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// One error of a failed request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorObject {
    /// UPPER_SNAKE error code.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// JSON path of the offending field, relative to the payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The 1-based character of the input the error points at (SQL console).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
}

/// A failed request: `{ "errors": [...] }`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub errors: Vec<ErrorObject>,
    /// Extra facts, such as the run id of a timed-out webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// A role as listed on a user.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleRef {
    /// Role id.
    pub id: Uuid,
    /// Role name.
    pub name: String,
}

/// A user account.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// User id.
    pub id: Uuid,
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Whether the email was verified.
    pub email_verified: bool,
    /// Deactivated accounts cannot sign in.
    pub active: bool,
    /// IANA time zone preference.
    pub timezone: Option<String>,
    /// Roles of the user.
    pub roles: Vec<RoleRef>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// `POST /api/auth/login` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginRequest {
    /// Sign-in email.
    pub email: String,
    /// Password.
    pub password: String,
}

/// Answer of a successful sign-in.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginResponse {
    /// The session token, to send as `Authorization: Bearer <token>`.
    pub token: String,
    /// The signed-in user.
    pub user: User,
}

/// `PATCH /api/auth/me` body; null clears a field.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateMeRequest {
    /// Display name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub name: Option<Option<String>>,
    /// IANA time zone name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub timezone: Option<Option<String>>,
}

/// A live session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Session id.
    pub id: Uuid,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Whether this is the session of the request.
    pub current: bool,
    /// Where sign-in came from.
    pub ip: Option<String>,
    /// The client's User-Agent.
    pub user_agent: Option<String>,
}

/// A provider one can sign in with (`GET /api/auth/oauth`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuthProvider {
    /// `google`, `github` or `oidc`.
    pub provider: String,
    /// Where a browser starts signing in with it (add `?redirect_to=`).
    pub start_url: String,
}

/// Query of `GET /api/auth/oauth/{provider}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OAuthStartQuery {
    /// Where the browser returns with `#token=` or `#error=`; its origin must
    /// be the public URL's, the email links' or one of `auth.redirect_allow_list`.
    pub redirect_to: Option<String>,
}

/// Query of `GET /api/auth/oauth/{provider}/callback`, as the provider sends it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OAuthCallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the flow was started with.
    pub state: Option<String>,
    /// The provider's error, when sign-in was refused there.
    pub error: Option<String>,
}

/// An identity of a provider linked to a user.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkedIdentity {
    /// Identity id.
    pub id: Uuid,
    /// `google`, `github` or `oidc`.
    pub provider: String,
    /// The provider's stable id of the person.
    pub subject: String,
    /// The email the provider gave last.
    pub email: Option<String>,
    /// When it was linked.
    pub created_at: DateTime<Utc>,
    /// When it last signed in.
    pub last_used_at: DateTime<Utc>,
}

/// `POST /api/auth/tokens` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTokenRequest {
    /// Label.
    pub name: String,
    /// Lifetime in days, 1 to 3650.
    pub lifetime_days: i64,
    /// `API` or `ADMIN`.
    pub plane: String,
}

/// `POST /admin/api/tokens` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminCreateTokenRequest {
    /// The owner.
    pub user_id: Uuid,
    /// Label.
    pub name: String,
    /// Lifetime in days, 1 to 3650.
    pub lifetime_days: i64,
    /// `API` or `ADMIN`.
    pub plane: String,
}

/// A personal access token, without its secret.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    /// Token id.
    pub id: Uuid,
    /// The owner.
    pub user_id: Uuid,
    /// Label.
    pub name: String,
    /// `API` or `ADMIN`.
    pub plane: String,
    /// The first characters of the token.
    pub prefix: String,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A token just created; `token` is the full secret, shown only here.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedToken {
    /// The token record.
    #[serde(flatten)]
    pub record: Token,
    /// The full secret.
    pub token: String,
}

/// `POST /admin/api/users` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateUserRequest {
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Initial password; without one the account cannot sign in yet.
    pub password: Option<String>,
    /// Roles; omitted gives the `Users` role.
    pub role_ids: Option<Vec<Uuid>>,
    /// Whether the email counts as verified (default false).
    pub email_verified: Option<bool>,
    /// IANA time zone name.
    pub timezone: Option<String>,
}

/// `PATCH /admin/api/users/{id}` body; null clears name and timezone.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateUserRequest {
    /// Display name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub name: Option<Option<String>>,
    /// Sign-in email.
    pub email: Option<String>,
    /// New password; ends the user's sessions.
    pub password: Option<String>,
    /// Replaces the roles.
    pub role_ids: Option<Vec<Uuid>>,
    /// Activates or deactivates the account.
    pub active: Option<bool>,
    /// Marks the email verified.
    pub email_verified: Option<bool>,
    /// IANA time zone name.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub timezone: Option<Option<String>>,
}

/// Query of `GET /admin/api/users`.
#[derive(Debug, Deserialize, ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<u64>,
    /// Users to skip (default 0).
    pub offset: Option<u64>,
    /// Matches part of the email or name, case-insensitively.
    pub search: Option<String>,
}

/// A role.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// Role id.
    pub id: Uuid,
    /// Unique name.
    pub name: String,
    /// What the role is for.
    pub description: Option<String>,
    /// Members may sign in and use the API.
    pub api_access: bool,
    /// `Administrators` and `Users` cannot be deleted.
    pub built_in: bool,
}

/// `POST /admin/api/roles` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateRoleRequest {
    /// Unique name.
    pub name: String,
    /// What the role is for.
    pub description: Option<String>,
    /// Members may sign in and use the API.
    pub api_access: bool,
}

/// `PATCH /admin/api/roles/{id}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRoleRequest {
    /// New name.
    pub name: Option<String>,
    /// New description; null clears it.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(nullable)]
    pub description: Option<Option<String>>,
    /// New API access flag.
    pub api_access: Option<bool>,
}

/// Query of `GET /admin/api/tokens`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct TokenListQuery {
    /// Only this user's tokens.
    pub user_id: Option<Uuid>,
}

/// Settings by dotted key, such as `auth.session_ttl_hours`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct SettingsMap(pub Map<String, Value>);

/// Query of `GET /admin/api/audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct AuditListQuery {
    /// Only this action, such as `auth.login`.
    pub action: Option<String>,
    /// Only this actor (user or token id).
    pub actor_id: Option<Uuid>,
    /// Page size, 1 to 1000 (default 100).
    pub limit: Option<u64>,
    /// Entries older than this entry id or RFC 3339 instant.
    pub before: Option<String>,
}

/// One audit entry.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Entry id.
    pub id: Uuid,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// `user`, `token` or `system`.
    pub actor_type: String,
    /// The user or token id.
    pub actor_id: Option<Uuid>,
    /// Dotted action name.
    pub action: String,
    /// The record acted on, such as `user:<id>`.
    pub target: Option<String>,
    /// Action-specific facts.
    pub details: Value,
    /// The caller's address.
    pub ip: Option<String>,
}

/// Answer of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable` when the database does not answer.
    pub status: String,
}

/// `POST /api/auth/register` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RegisterRequest {
    /// Sign-in email.
    pub email: String,
    /// Password (at least `auth.password_min_length` characters).
    pub password: String,
    /// Display name.
    pub name: Option<String>,
}

/// A body with only an email (`password/forgot`, `email/resend`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct EmailRequest {
    /// The account's email.
    pub email: String,
}

/// `POST /api/auth/email/resend` body; the email is needed only without a session.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResendRequest {
    /// The account's email (without a session).
    pub email: Option<String>,
}

/// A body with a one-time token (`email/verify`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenRequest {
    /// The token from the emailed link.
    pub token: String,
}

/// A one-time token with a new password (`password/reset`, `invitations/accept`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct TokenPasswordRequest {
    /// The token from the emailed link.
    pub token: String,
    /// The new password.
    pub password: String,
}

/// `POST /api/auth/password/change` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangePasswordRequest {
    /// The password in use.
    pub current_password: String,
    /// The new password.
    pub new_password: String,
}

/// `POST /admin/api/invitations` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateInvitationRequest {
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
}

/// A pending invitation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    /// Invitation id.
    pub id: Uuid,
    /// Who is invited.
    pub email: String,
    /// Their display name.
    pub name: Option<String>,
    /// Roles they get on accepting.
    pub role_ids: Vec<Uuid>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

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
    /// Columns: name, dataType, nullable, default, identity, primaryKey, check, checkMessage, foreignKey.
    pub columns: Value,
}

/// A table registered for the Data API.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Resource id.
    pub id: Uuid,
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
    /// Methods the Data API answers for it; empty: hidden.
    pub exposed_methods: Vec<String>,
    /// Registration time.
    pub created_at: DateTime<Utc>,
}

/// `POST /admin/api/resources` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RegisterResourceRequest {
    /// Schema of an existing table.
    pub schema: String,
    /// The table.
    pub table: String,
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

/// `POST /admin/api/workflows` and `PATCH /admin/api/workflows/{id}` body
/// (API.md section 6); PATCH changes only what it names.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowRequest {
    /// URL segment of the webhook: lower-case letters, digits and `-`.
    pub slug: Option<String>,
    /// Display name (default: the slug).
    pub name: Option<String>,
    /// Disabled workflows do not run (default true).
    pub enabled: Option<bool>,
    /// `{ type: webhook, method, response, waitSeconds, onTimeout, access, executeAs }`
    /// or `{ type: dbEvent, resourceId, events, executeAs }`.
    pub trigger: Option<Value>,
    /// The steps, in order: `{ id, type, ... }`.
    pub steps: Option<Value>,
}

/// A workflow; `trigger` and `steps` are the draft.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// Workflow id.
    pub id: Uuid,
    /// URL segment of the webhook.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Whether it runs.
    pub enabled: bool,
    /// Whether a published version exists.
    pub published: bool,
    /// When the draft was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// The draft's trigger.
    pub trigger: Value,
    /// The draft's steps.
    pub steps: Value,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// Why a run failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunError {
    /// UPPER_SNAKE code.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// A run's outcome: `{ id, status, result, error }`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunOutcome {
    /// Run id.
    pub id: Uuid,
    /// RUNNING, SUCCEEDED, FAILED or CANCELLED.
    pub status: String,
    /// What the run ended with.
    pub result: Value,
    /// Why it failed, else null.
    pub error: Option<RunError>,
}

/// An asynchronous webhook's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunStarted {
    /// The run id, for the result route.
    pub run: Uuid,
}

/// One step of a stored run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStep {
    /// Step id.
    pub id: String,
    /// Step type.
    #[serde(rename = "type")]
    pub kind: String,
    /// RUNNING, SUCCEEDED or FAILED.
    pub status: String,
    /// Its output.
    pub result: Value,
    /// Why it failed.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}

/// A stored run, as the history lists it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    /// Run id.
    pub id: Uuid,
    /// Its workflow.
    pub workflow_id: Uuid,
    /// RUNNING, SUCCEEDED, FAILED or CANCELLED.
    pub status: String,
    /// Started in test mode (the draft).
    pub test: bool,
    /// `start.data` with credential headers redacted.
    pub input: Value,
    /// What it ended with.
    pub result: Value,
    /// Why it failed.
    pub error: Option<RunError>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Each step's outcome.
    pub steps: Vec<RunStep>,
}

/// `POST /admin/api/workflows/{id}/test` body: the trigger input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRunRequest {
    /// Query parameters.
    pub query: Option<Value>,
    /// The body.
    pub body: Option<Value>,
    /// `{ ip, headers }`.
    pub meta: Option<Value>,
}

/// Query of `GET /admin/api/workflows/{id}/runs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunListQuery {
    /// Most runs (1..1000, default 50).
    pub limit: Option<u64>,
    /// Runs skipped.
    pub offset: Option<u64>,
}

/// An output column of a DataView: a plain `column` (grouped), an `agg`
/// (count, sum, avg, min, max) of a column, or a `bucket` (hour, day, week,
/// month, year) of a date or timestamp column, cut in the caller's zone.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DataViewColumn {
    /// Its name in the answer (letters, digits, `_`).
    pub name: String,
    /// The source column (optional only for `count`).
    pub column: Option<String>,
    /// The aggregate.
    pub agg: Option<String>,
    /// The time bucket.
    pub bucket: Option<String>,
}

/// Body of `POST` and `PATCH /admin/api/dataviews`: on PATCH, the fields
/// given replace the draft's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataViewRequest {
    /// Address under `/api/views/` (lower-case letters, digits, `-`).
    pub slug: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The source table, `schema.table`.
    pub source: Option<String>,
    /// Output columns (at least one).
    pub columns: Option<Vec<DataViewColumn>>,
    /// Rows of the source read, in the filter language (`$USER`, `$PERIOD` allowed).
    pub filter: Option<Value>,
    /// Output columns to sort by; `-name` for descending.
    pub sort: Option<Vec<String>>,
    /// Rows the view yields at most.
    pub limit: Option<u32>,
}

/// A DataView; `source`, `columns`, `filter`, `sort` and `limit` are the draft.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataView {
    /// DataView id.
    pub id: Uuid,
    /// Address under `/api/views/`.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// The source table, `schema.table`.
    pub source: Value,
    /// Output columns.
    #[schema(value_type = Vec<DataViewColumn>)]
    pub columns: Value,
    /// Rows of the source read.
    pub filter: Value,
    /// Output columns to sort by.
    #[schema(value_type = Vec<String>)]
    pub sort: Value,
    /// Rows the view yields at most.
    #[schema(value_type = Option<u32>)]
    pub limit: Value,
    /// Whether a published snapshot is served.
    pub published: bool,
    /// When the draft was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A draft run by an administrator.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataViewPreview {
    /// The statement that ran, with `$n` placeholders.
    pub sql: String,
    /// The values bound to the placeholders, in order.
    pub params: Vec<Value>,
    /// The rows it answered.
    pub rows: Value,
}

/// A widget's place on the 12-column grid.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WidgetLayout {
    /// First column, 0 to 11.
    pub col: u32,
    /// First row, from 0.
    pub row: u32,
    /// Width in columns, 1 to 12 (`col + w` at most 12).
    pub w: u32,
    /// Height in rows, 1 to 24.
    pub h: u32,
}

/// A dashboard widget.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardWidget {
    /// Id, unique on the dashboard.
    pub id: String,
    /// number, line, bar, pie or table.
    #[serde(rename = "type")]
    pub kind: String,
    /// Heading.
    pub title: Option<String>,
    /// The DataView shown.
    pub data_view_id: Uuid,
    /// Output column along the axis (line, bar; a pie's labels).
    pub x: Option<String>,
    /// Output columns drawn (number and pie: exactly one; a table: the columns shown).
    pub y: Option<Vec<String>>,
    /// Place on the grid; omitted: full width, stacked.
    pub layout: Option<WidgetLayout>,
}

/// Body of `POST` and `PATCH /admin/api/dashboards`: on PATCH, the fields given replace.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardRequest {
    /// Address under `/api/dashboards/` and `/admin/dashboards/`.
    pub slug: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Seconds between refreshes of the page (5 to 86400); omitted: none.
    pub refresh_seconds: Option<u32>,
    /// The widgets.
    pub widgets: Option<Vec<DashboardWidget>>,
}

/// A dashboard.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    /// Dashboard id.
    pub id: Uuid,
    /// Address under `/api/dashboards/` and `/admin/dashboards/`.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Seconds between refreshes of the page.
    pub refresh_seconds: Option<u32>,
    /// The widgets.
    #[schema(value_type = Vec<DashboardWidget>)]
    pub widgets: Value,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A dashboard as the caller sees it: each widget with `rows`, or with
/// `error` when the caller may not read its view.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedDashboard {
    /// Dashboard id.
    pub id: Uuid,
    /// Its address.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Seconds between refreshes of the page.
    pub refresh_seconds: Option<u32>,
    /// The caller's time zone, where buckets are cut.
    pub zone: String,
    /// The widgets, each with `rows` (the view's output) or `error` ({ code, message }).
    #[schema(value_type = Vec<Object>)]
    pub widgets: Vec<Value>,
}

/// A dashboard in a list for readers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardSummary {
    /// Dashboard id.
    pub id: Uuid,
    /// Its address.
    pub slug: String,
    /// Display name.
    pub name: String,
}

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

/// A file's record (columns the caller's grants mask are null).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// File id.
    pub id: Uuid,
    /// The uploaded file's name.
    pub name: Option<String>,
    /// Its media type.
    pub content_type: Option<String>,
    /// Its length in bytes.
    pub size: Option<i64>,
    /// SHA-256 of its bytes, lower-case hex.
    pub sha256: Option<String>,
    /// PRIVATE or PUBLIC.
    pub visibility: Option<String>,
    /// The uploader.
    pub owner_id: Option<Uuid>,
    /// When it was uploaded.
    pub created_at: Option<DateTime<Utc>>,
}
