use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use permissions::{Role, RoleChanges, RoleStore};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set, TransactionTrait,
};
use uuid::Uuid;

use crate::entity::{role, role_member, user};
use crate::{PgStore, ensure_admin_remains, map_err, write_audit};

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

#[async_trait]
impl RoleStore for PgStore {
    async fn roles(&self) -> Result<Vec<Role>, StoreError> {
        let rows = role::Entity::find()
            .order_by_desc(role::Column::BuiltIn)
            .order_by_asc(role::Column::CreatedAt)
            .order_by_asc(role::Column::Name)
            .all(&self.db)
            .await
            .map_err(map_err)?;
        Ok(rows.into_iter().map(to_role).collect())
    }

    async fn role(&self, id: Uuid) -> Result<Option<Role>, StoreError> {
        Ok(role::Entity::find_by_id(id)
            .one(&self.db)
            .await
            .map_err(map_err)?
            .map(to_role))
    }

    async fn create_role(&self, new: Role, event: AuditEvent) -> Result<Role, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
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
        .await
        .map_err(map_err)?;
        write_audit(&txn, event).await?;
        txn.commit().await.map_err(map_err)?;
        Ok(to_role(model))
    }

    async fn update_role(
        &self,
        id: Uuid,
        changes: RoleChanges,
        event: AuditEvent,
    ) -> Result<Role, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let current = role::Entity::find_by_id(id)
            .one(&txn)
            .await
            .map_err(map_err)?
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
        let model = row.update(&txn).await.map_err(map_err)?;
        write_audit(&txn, event).await?;
        txn.commit().await.map_err(map_err)?;
        Ok(to_role(model))
    }

    async fn delete_role(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let deleted = role::Entity::delete_by_id(id)
            .exec(&txn)
            .await
            .map_err(map_err)?
            .rows_affected;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        write_audit(&txn, event).await?;
        txn.commit().await.map_err(map_err)
    }

    async fn add_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let role_exists = role::Entity::find_by_id(role_id)
            .one(&txn)
            .await
            .map_err(map_err)?
            .is_some();
        let user_exists = user::Entity::find_by_id(user_id)
            .one(&txn)
            .await
            .map_err(map_err)?
            .is_some();
        if !role_exists || !user_exists {
            return Err(StoreError::NotFound);
        }
        let row = role_member::ActiveModel {
            user_id: Set(user_id),
            role_id: Set(role_id),
            created_at: Set(chrono::Utc::now()),
        };
        role_member::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([role_member::Column::UserId, role_member::Column::RoleId])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await
            .map_err(map_err)?;
        write_audit(&txn, event).await?;
        txn.commit().await.map_err(map_err)
    }

    async fn remove_member(
        &self,
        role_id: Uuid,
        user_id: Uuid,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let role_exists = role::Entity::find_by_id(role_id)
            .one(&txn)
            .await
            .map_err(map_err)?
            .is_some();
        let user_exists = user::Entity::find_by_id(user_id)
            .one(&txn)
            .await
            .map_err(map_err)?
            .is_some();
        if !role_exists || !user_exists {
            return Err(StoreError::NotFound);
        }
        let removed = role_member::Entity::delete_many()
            .filter(role_member::Column::RoleId.eq(role_id))
            .filter(role_member::Column::UserId.eq(user_id))
            .exec(&txn)
            .await
            .map_err(map_err)?
            .rows_affected;
        if removed > 0 && role_id == kernel::ADMINISTRATORS_ROLE_ID {
            ensure_admin_remains(&txn).await?;
        }
        write_audit(&txn, event).await?;
        txn.commit().await.map_err(map_err)
    }
}
