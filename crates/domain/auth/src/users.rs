//! Users as administrators and their owners manage them: create, change,
//! delete, list, and the first administrator of a deployment.

use audit::{Actor, AuditEvent};
use kernel::settings::Settings;
use kernel::validate::{Email, NAME_MAX, TimeZoneName, short_text};
use kernel::{FieldError, new_id};
use permissions::Principal;
use serde_json::json;
use uuid::Uuid;

use crate::model::*;
use crate::{AccountService, AuthError};

/// Input of a user creation, before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateUser {
    /// Sign-in email.
    pub email: String,
    /// Display name.
    pub name: Option<String>,
    /// Initial password.
    pub password: Option<String>,
    /// Roles; `None` gives the `Users` role.
    pub role_ids: Option<Vec<Uuid>>,
    /// Whether the email counts as verified.
    pub email_verified: Option<bool>,
    /// IANA zone.
    pub timezone: Option<String>,
}

/// Input of a user change, before validation. `Some(None)` clears a field.
#[derive(Debug, Clone, Default)]
pub struct ChangeUser {
    /// Display name.
    pub name: Option<Option<String>>,
    /// Sign-in email.
    pub email: Option<String>,
    /// New password.
    pub password: Option<String>,
    /// Replaces the roles.
    pub role_ids: Option<Vec<Uuid>>,
    /// Activates or deactivates.
    pub active: Option<bool>,
    /// Verified flag.
    pub email_verified: Option<bool>,
    /// IANA zone.
    pub timezone: Option<Option<String>>,
}

pub(crate) fn optional_name(raw: Option<&str>) -> Result<Option<String>, FieldError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(name) => short_text(name, "name", NAME_MAX).map(Some),
    }
}

pub(crate) fn optional_zone(raw: Option<&str>) -> Result<Option<String>, FieldError> {
    raw.map(|z| TimeZoneName::parse(z, "timezone").map(TimeZoneName::into_inner))
        .transpose()
}

impl AccountService {
    /// One user.
    pub async fn user(&self, id: Uuid) -> Result<User, AuthError> {
        Ok(self
            .store
            .user(id)
            .await?
            .ok_or(kernel::StoreError::NotFound)?)
    }

    /// Changes the caller's own name and time zone.
    pub async fn update_me(
        &self,
        caller: &Principal,
        name: Option<Option<String>>,
        timezone: Option<Option<String>>,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let changes = UserChanges {
            name: name.map(|n| optional_name(n.as_deref())).transpose()?,
            timezone: timezone.map(|z| optional_zone(z.as_deref())).transpose()?,
            ..UserChanges::default()
        };
        let event = AuditEvent::new(
            caller.actor(),
            "user.update",
            target("user", caller.user_id),
            ip,
        )
        .with_details(json!({ "self": true }));
        Ok(self
            .store
            .update_user(
                caller.user_id,
                changes,
                caller.session_id(),
                self.now(),
                event,
            )
            .await?)
    }

    /// A page of users.
    pub async fn users(
        &self,
        search: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<UserPage, AuthError> {
        let search = search.map(str::trim).filter(|s| !s.is_empty());
        if search.is_some_and(|s| s.chars().count() > NAME_MAX) {
            return Err(FieldError::new("search", "is too long").into());
        }
        Ok(self.store.users(search, limit, offset).await?)
    }

    /// The members of a role.
    pub async fn role_members(&self, role_id: Uuid) -> Result<Vec<User>, AuthError> {
        Ok(self
            .store
            .role_members(role_id)
            .await?
            .ok_or(kernel::StoreError::NotFound)?)
    }

    /// Validates the input of a new user and hashes its password.
    pub(crate) async fn new_user(
        &self,
        input: CreateUser,
        settings: &Settings,
    ) -> Result<NewUser, AuthError> {
        let email = Email::parse(&input.email, "email")?;
        let name = optional_name(input.name.as_deref())?;
        let timezone = optional_zone(input.timezone.as_deref())?;
        let password_hash = match input.password {
            Some(p) => Some(self.hash_new_password(&p, settings).await?),
            None => None,
        };
        Ok(NewUser {
            id: new_id(),
            email,
            name,
            password_hash,
            role_ids: input
                .role_ids
                .unwrap_or_else(|| vec![kernel::USERS_ROLE_ID]),
            email_verified: input.email_verified.unwrap_or(false),
            timezone,
            created_at: self.now(),
        })
    }

    /// Creates a user (administrators, the command line, bootstrap).
    pub async fn create_user(
        &self,
        actor: Actor,
        input: CreateUser,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let settings = self.settings.current().await?;
        let user = self.new_user(input, &settings).await?;
        let event = AuditEvent::new(actor, "user.create", target("user", user.id), ip)
            .with_details(json!({ "email": user.email.as_str(), "roleIds": user.role_ids }));
        Ok(self.store.create_user(user, None, event).await?)
    }

    /// Changes a user. A new password ends all the user's sessions except the caller's own.
    pub async fn update_user(
        &self,
        caller: Option<&Principal>,
        id: Uuid,
        input: ChangeUser,
        ip: Option<String>,
    ) -> Result<User, AuthError> {
        let settings = self.settings.current().await?;
        let password_hash = match input.password {
            Some(p) => Some(self.hash_new_password(&p, &settings).await?),
            None => None,
        };
        let mut changed: Vec<&str> = Vec::new();
        let flags = [
            ("name", input.name.is_some()),
            ("email", input.email.is_some()),
            ("password", password_hash.is_some()),
            ("roleIds", input.role_ids.is_some()),
            ("active", input.active.is_some()),
            ("emailVerified", input.email_verified.is_some()),
            ("timezone", input.timezone.is_some()),
        ];
        changed.extend(flags.iter().filter(|(_, set)| *set).map(|(name, _)| *name));
        let changes = UserChanges {
            name: input
                .name
                .map(|n| optional_name(n.as_deref()))
                .transpose()?,
            email: input.email.map(|e| Email::parse(&e, "email")).transpose()?,
            password_hash,
            role_ids: input.role_ids,
            active: input.active,
            email_verified: input.email_verified,
            timezone: input
                .timezone
                .map(|z| optional_zone(z.as_deref()))
                .transpose()?,
        };
        let actor = caller.map_or(Actor::SYSTEM, Principal::actor);
        let event = AuditEvent::new(actor, "user.update", target("user", id), ip)
            .with_details(json!({ "fields": changed }));
        let keep = caller
            .filter(|c| c.user_id == id)
            .and_then(Principal::session_id);
        Ok(self
            .store
            .update_user(id, changes, keep, self.now(), event)
            .await?)
    }

    /// Deletes a user.
    pub async fn delete_user(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        let event = AuditEvent::new(caller.actor(), "user.delete", target("user", id), ip);
        Ok(self.store.delete_user(id, event).await?)
    }

    /// Creates an administrator, or resets the password of the account with
    /// that email and makes it a verified, active administrator.
    pub async fn ensure_admin(
        &self,
        email: &str,
        password: &str,
        name: Option<String>,
    ) -> Result<User, AuthError> {
        let email = Email::parse(email, "email")?;
        match self.store.user_by_email(email.as_str()).await? {
            None => {
                let input = CreateUser {
                    email: email.as_str().to_owned(),
                    name,
                    password: Some(password.to_owned()),
                    role_ids: Some(vec![kernel::ADMINISTRATORS_ROLE_ID]),
                    email_verified: Some(true),
                    timezone: None,
                };
                self.create_user(Actor::SYSTEM, input, None).await
            }
            Some(existing) => {
                let mut roles: Vec<Uuid> = existing.roles.iter().map(|r| r.id).collect();
                if !roles.contains(&kernel::ADMINISTRATORS_ROLE_ID) {
                    roles.push(kernel::ADMINISTRATORS_ROLE_ID);
                }
                let input = ChangeUser {
                    name: name.map(Some),
                    password: Some(password.to_owned()),
                    role_ids: Some(roles),
                    active: Some(true),
                    email_verified: Some(true),
                    ..ChangeUser::default()
                };
                self.update_user(None, existing.id, input, None).await
            }
        }
    }
}
