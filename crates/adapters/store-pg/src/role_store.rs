use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use permissions::{Role, RoleChanges, RoleStore};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use uuid::Uuid;

use crate::entity::{role, role_member, user};
use crate::query::{Begin, Stored};
use crate::{PgStore, add_memberships, commit_with_audit, ensure_admin_remains};

fn to_role(model: role::Model) -> Role {
    Role {
        id: model.id,
        name: model.name,
        description: model.description,
        api_access: model.api_access,
        built_in: model.built_in,
        created_at: model.created_at,
    }
}

/// NotFound unless both the role and the user exist.
async fn ensure_role_and_user(
    conn: &impl ConnectionTrait,
    role_id: Uuid,
    user_id: Uuid,
) -> Result<(), StoreError> {
    let role = role::Entity::find_by_id(role_id).one(conn).stored().await?;
    let user = user::Entity::find_by_id(user_id).one(conn).stored().await?;
    if role.is_some() && user.is_some() {
        Ok(())
    } else {
        Err(StoreError::NotFound)
    }
}

#[async_trait]
impl RoleStore for PgStore {
    async fn roles(&self) -> Result<Vec<Role>, StoreError> {
        let rows = role::Entity::find()
            .order_by_desc(role::Column::BuiltIn)
            .order_by_asc(role::Column::CreatedAt)
            .order_by_asc(role::Column::Name)
            .all(&self.db)
            .stored()
            .await?;
        Ok(rows.into_iter().map(to_role).collect())
    }

    async fn role(&self, id: Uuid) -> Result<Option<Role>, StoreError> {
        Ok(role::Entity::find_by_id(id)
            .one(&self.db)
            .stored()
            .await?
            .map(to_role))
    }

    async fn create_role(&self, new: Role, event: AuditEvent) -> Result<Role, StoreError> {
        let txn = self.db.open_txn().await?;
        let model = role::ActiveModel {
            id: Set(new.id),
            name: Set(new.name),
            description: Set(new.description),
            api_access: Set(new.api_access),
            admin_access: Set(false),
            built_in: Set(false),
            created_at: Set(new.created_at),
        }
        .insert(&txn)
        .stored()
        .await?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(to_role(model))
    }

    async fn update_role(
        &self,
        id: Uuid,
        changes: RoleChanges,
        event: AuditEvent,
    ) -> Result<Role, StoreError> {
        let txn = self.db.open_txn().await?;
        let current = role::Entity::find_by_id(id)
            .one(&txn)
            .stored()
            .await?
            .ok_or(StoreError::NotFound)?;
        let mut row: role::ActiveModel = current.into();
        if let Some(name) = changes.name {
            row.name = Set(name);
        }
        if let Some(description) = changes.description {
            row.description = Set(description);
        }
        if let Some(api_access) = changes.api_access {
            row.api_access = Set(api_access);
        }
        let model = row.update(&txn).stored().await?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(to_role(model))
    }

    async fn delete_role(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        let deleted = role::Entity::delete_by_id(id)
            .exec(&txn)
            .stored()
            .await?
            .rows_affected;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        self.commit_catalog_change(txn, event).await
    }

    async fn add_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        ensure_role_and_user(&txn, role_id, user_id).await?;
        add_memberships(&txn, user_id, &[role_id], self.now()).await?;
        commit_with_audit(txn, event, self.now()).await
    }

    async fn remove_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        ensure_role_and_user(&txn, role_id, user_id).await?;
        let removed = role_member::Entity::delete_many()
            .filter(role_member::Column::RoleId.eq(role_id))
            .filter(role_member::Column::UserId.eq(user_id))
            .exec(&txn)
            .stored()
            .await?
            .rows_affected;
        if removed > 0 && role_id == kernel::ADMINISTRATORS_ROLE_ID {
            ensure_admin_remains(&txn).await?;
        }
        commit_with_audit(txn, event, self.now()).await
    }
}
