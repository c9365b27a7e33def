//! Users, roles, settings, the audit log and health, for the Admin API.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::*;

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
