//! Roles and their members.

use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::validate::{NAME_MAX, optional_text, short_text};
use kernel::{Clock, FieldError, StoreError, new_id};
use serde_json::json;
use uuid::Uuid;

use crate::Principal;

/// A role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// Role id.
    pub id: Uuid,
    /// Unique name (case-insensitive).
    pub name: String,
    /// What the role is for.
    pub description: Option<String>,
    /// Members may use the API (and sign in).
    pub api_access: bool,
    /// `Administrators` and `Users` cannot be deleted or renamed.
    pub built_in: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// Changes to a role; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct RoleChanges {
    /// New name.
    pub name: Option<String>,
    /// New description (`Some(None)` clears it).
    pub description: Option<Option<String>>,
    /// New API access flag.
    pub api_access: Option<bool>,
}

/// Persistence of roles and memberships; writes carry their audit event.
#[async_trait]
pub trait RoleStore: Send + Sync + 'static {
    /// All roles, built-ins first.
    async fn roles(&self) -> Result<Vec<Role>, StoreError>;
    /// One role.
    async fn role(&self, id: Uuid) -> Result<Option<Role>, StoreError>;
    /// Creates a role; a taken name is a conflict.
    async fn create_role(&self, role: Role, event: AuditEvent) -> Result<Role, StoreError>;
    /// Changes a role. Refuses to leave no active administrator.
    async fn update_role(
        &self,
        id: Uuid,
        changes: RoleChanges,
        event: AuditEvent,
    ) -> Result<Role, StoreError>;
    /// Deletes a role and its memberships.
    async fn delete_role(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError>;
    /// Adds a member (idempotent); unknown role or user is NotFound.
    async fn add_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
    /// Removes a member (idempotent). Refuses to leave no active administrator.
    async fn remove_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError>;
}

/// Failures of role and grant administration.
#[derive(Debug, thiserror::Error)]
pub enum PermissionsError {
    /// A field is missing or wrong.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl kernel::ErrorCode for PermissionsError {
    fn code(&self) -> kernel::Code {
        match self {
            PermissionsError::Invalid(e) => e.code(),
            PermissionsError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> std::borrow::Cow<'_, str> {
        match self {
            PermissionsError::Invalid(e) => e.message(),
            PermissionsError::Store(e) => e.message(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            PermissionsError::Invalid(e) => e.field(),
            PermissionsError::Store(e) => e.field(),
        }
    }
}

/// Role administration.
#[derive(Clone)]
pub struct RoleService {
    store: Arc<dyn RoleStore>,
    clock: Arc<dyn Clock>,
}

fn target(id: Uuid) -> Option<String> {
    Some(format!("role:{id}"))
}

impl RoleService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn RoleStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// All roles.
    pub async fn roles(&self) -> Result<Vec<Role>, PermissionsError> {
        Ok(self.store.roles().await?)
    }

    /// One role.
    pub async fn role(&self, id: Uuid) -> Result<Role, PermissionsError> {
        Ok(self.store.role(id).await?.ok_or(StoreError::NotFound)?)
    }

    /// Creates a role.
    pub async fn create(
        &self,
        caller: &Principal,
        name: &str,
        description: Option<&str>,
        api_access: bool,
        ip: Option<String>,
    ) -> Result<Role, PermissionsError> {
        let role = Role {
            id: new_id(),
            name: short_text(name, "name", NAME_MAX)?,
            description: optional_text(description, "description")?,
            api_access,
            built_in: false,
            created_at: self.clock.now(),
        };
        let event = AuditEvent::new(caller.actor(), "role.create", target(role.id), ip)
            .with_details(json!({ "name": role.name, "apiAccess": api_access }));
        Ok(self.store.create_role(role, event).await?)
    }

    /// Changes a role; built-in roles keep their name and API access.
    pub async fn update(
        &self,
        caller: &Principal,
        id: Uuid,
        name: Option<&str>,
        description: Option<Option<&str>>,
        api_access: Option<bool>,
        ip: Option<String>,
    ) -> Result<Role, PermissionsError> {
        let current = self.role(id).await?;
        let changes = RoleChanges {
            name: name.map(|n| short_text(n, "name", NAME_MAX)).transpose()?,
            description: description
                .map(|d| optional_text(d, "description"))
                .transpose()?,
            api_access,
        };
        if current.built_in {
            if changes.name.as_ref().is_some_and(|n| *n != current.name) {
                return Err(FieldError::new("name", "built-in roles cannot be renamed").into());
            }
            if changes.api_access.is_some_and(|a| a != current.api_access) {
                return Err(
                    FieldError::new("apiAccess", "built-in roles keep their API access").into(),
                );
            }
        }
        let event = AuditEvent::new(caller.actor(), "role.update", target(id), ip);
        Ok(self.store.update_role(id, changes, event).await?)
    }

    /// Deletes a role; built-in roles cannot be deleted.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), PermissionsError> {
        if self.role(id).await?.built_in {
            return Err(FieldError::new("id", "built-in roles cannot be deleted").into());
        }
        let event = AuditEvent::new(caller.actor(), "role.delete", target(id), ip);
        Ok(self.store.delete_role(id, event).await?)
    }

    /// Adds a user to a role.
    pub async fn add_member(
        &self,
        caller: &Principal,
        role_id: Uuid,
        user_id: Uuid,
        ip: Option<String>,
    ) -> Result<(), PermissionsError> {
        let event = AuditEvent::new(caller.actor(), "role.member_add", target(role_id), ip)
            .with_details(json!({ "userId": user_id }));
        Ok(self.store.add_member(role_id, user_id, event).await?)
    }

    /// Removes a user from a role.
    pub async fn remove_member(
        &self,
        caller: &Principal,
        role_id: Uuid,
        user_id: Uuid,
        ip: Option<String>,
    ) -> Result<(), PermissionsError> {
        let event = AuditEvent::new(caller.actor(), "role.member_remove", target(role_id), ip)
            .with_details(json!({ "userId": user_id }));
        Ok(self.store.remove_member(role_id, user_id, event).await?)
    }
}
