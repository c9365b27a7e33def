//! Users and their roles, as administrators manage them; the last active
//! administrator is never removed.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{NewUser, TokenMail, User, UserChanges, UserPage, UserStore};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set, Value};
use uuid::Uuid;

pub(crate) use super::statements::insert_user;
use super::statements::{
    USER_SELECT, like_pattern, load_user, load_user_where, set_roles, user_from_row,
};
use crate::entity::{session, user};
use crate::query::{Begin, Commit, Query, Stored};
use crate::{
    PgStore, commit_with_audit, ensure_admin_remains, is_active_admin, rows, stmt, write_audit,
};

#[async_trait]
impl UserStore for PgStore {
    async fn user(&self, id: Uuid) -> Result<Option<User>, StoreError> {
        load_user(&self.db, id).await
    }

    async fn user_by_email(&self, email: &str) -> Result<Option<User>, StoreError> {
        load_user_where(&self.db, "lower(u.email) = lower($1)", email.into()).await
    }

    async fn users(
        &self,
        search: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<UserPage, StoreError> {
        let filter = "WHERE ($1::text IS NULL OR u.email ILIKE $1 OR u.name ILIKE $1)";
        let pattern: Value = search.map(like_pattern).into();
        let sql = format!(
            "{USER_SELECT} {filter} GROUP BY u.id ORDER BY u.created_at, u.id LIMIT $2 OFFSET $3"
        );
        let rows = self
            .db
            .fetch_all(stmt(&sql, [pattern.clone(), limit.into(), offset.into()]))
            .await?;
        let users = rows
            .iter()
            .map(|row| user_from_row(row, "id"))
            .collect::<Result<Vec<_>, _>>()?;
        let count_sql = format!("SELECT count(*) AS n FROM svc.users u {filter}");
        let total: i64 = self
            .db
            .fetch_optional(stmt(&count_sql, [pattern]))
            .await?
            .map(|r| rows::column(&r, "n"))
            .transpose()?
            .unwrap_or(0);
        Ok(UserPage {
            users,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn role_members(&self, role_id: Uuid) -> Result<Option<Vec<User>>, StoreError> {
        let sql = format!(
            "{USER_SELECT} WHERE u.id IN (SELECT user_id FROM svc.role_members WHERE role_id = $1) \
             GROUP BY u.id ORDER BY u.created_at, u.id"
        );
        let rows = self.db.fetch_all(stmt(&sql, [role_id.into()])).await?;
        if rows.is_empty()
            && crate::entity::role::Entity::find_by_id(role_id)
                .one(&self.db)
                .stored()
                .await?
                .is_none()
        {
            return Ok(None);
        }
        rows.iter()
            .map(|row| user_from_row(row, "id"))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn create_user(
        &self,
        new: NewUser,
        mail: Option<TokenMail>,
        event: AuditEvent,
    ) -> Result<User, StoreError> {
        let txn = self.db.open_txn().await?;
        insert_user(&txn, &new, self.now()).await?;
        if let Some(mail) = mail {
            crate::account_store::insert_mail(&txn, mail).await?;
        }
        write_audit(&txn, event, self.now()).await?;
        let user = load_user(&txn, new.id).await?.ok_or(StoreError::NotFound)?;
        txn.commit_txn().await?;
        Ok(user)
    }

    async fn update_user(
        &self,
        id: Uuid,
        changes: UserChanges,
        keep_session: Option<Uuid>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<User, StoreError> {
        let txn = self.db.open_txn().await?;
        let current = user::Entity::find_by_id(id)
            .one(&txn)
            .stored()
            .await?
            .ok_or(StoreError::NotFound)?;
        let was_admin = is_active_admin(&txn, id).await?;
        let new_password = changes.password_hash.is_some();
        let deactivated = changes.active == Some(false);
        let mut row: user::ActiveModel = current.into();
        if let Some(name) = changes.name {
            row.name = Set(name);
        }
        if let Some(email) = changes.email {
            row.email = Set(email.as_str().to_owned());
        }
        if let Some(hash) = changes.password_hash {
            row.password_hash = Set(Some(hash));
            row.failed_sign_ins = Set(0);
            row.locked_until = Set(None);
        }
        if let Some(active) = changes.active {
            row.active = Set(active);
        }
        if let Some(verified) = changes.email_verified {
            row.email_verified = Set(verified);
        }
        if let Some(zone) = changes.timezone {
            row.timezone = Set(zone);
        }
        row.updated_at = Set(now);
        row.update(&txn).stored().await?;
        if let Some(roles) = &changes.role_ids {
            set_roles(&txn, id, roles, self.now()).await?;
        }
        if new_password || deactivated {
            let mut end = session::Entity::update_many()
                .col_expr(session::Column::RevokedAt, Expr::value(now))
                .filter(session::Column::UserId.eq(id))
                .filter(session::Column::RevokedAt.is_null());
            if let Some(keep) = keep_session.filter(|_| !deactivated) {
                end = end.filter(session::Column::Id.ne(keep));
            }
            end.exec(&txn).stored().await?;
        }
        if was_admin {
            ensure_admin_remains(&txn).await?;
        }
        write_audit(&txn, event, self.now()).await?;
        let user = load_user(&txn, id).await?.ok_or(StoreError::NotFound)?;
        txn.commit_txn().await?;
        Ok(user)
    }

    async fn delete_user(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        let was_admin = is_active_admin(&txn, id).await?;
        let deleted = user::Entity::delete_by_id(id)
            .exec(&txn)
            .stored()
            .await?
            .rows_affected;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        if was_admin {
            ensure_admin_remains(&txn).await?;
        }
        commit_with_audit(txn, event, self.now()).await
    }
}
