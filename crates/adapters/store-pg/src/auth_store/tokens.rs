//! Personal access tokens: listed, created and revoked, audited.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{NewToken, TokenInfo, TokenStore};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use super::statements::token_info;
use crate::entity::api_token;
use crate::query::{Begin, Stored};
use crate::{PgStore, commit_with_audit, execute};

#[async_trait]
impl TokenStore for PgStore {
    async fn tokens(
        &self,
        user_id: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> Result<Vec<TokenInfo>, StoreError> {
        let mut select = api_token::Entity::find()
            .filter(api_token::Column::RevokedAt.is_null())
            .filter(api_token::Column::ExpiresAt.gt(now));
        if let Some(owner) = user_id {
            select = select.filter(api_token::Column::UserId.eq(owner));
        }
        let rows = select
            .order_by_desc(api_token::Column::CreatedAt)
            .all(&self.db)
            .stored()
            .await?;
        Ok(rows.into_iter().map(token_info).collect())
    }

    async fn create_token(
        &self,
        new: NewToken,
        event: AuditEvent,
    ) -> Result<TokenInfo, StoreError> {
        let txn = self.db.open_txn().await?;
        if let Some(session) = new.creator_session {
            // The creator's row first (a claim of the account locks it too),
            // then, on what is committed by then, its session still live.
            execute(
                &txn,
                "SELECT 1 FROM svc.users WHERE id = $1 FOR SHARE",
                [new.created_by.into()],
            )
            .await?;
            let live = execute(
                &txn,
                "SELECT 1 FROM svc.sessions WHERE id = $1 AND revoked_at IS NULL",
                [session.into()],
            )
            .await?;
            if live == 0 {
                return Err(StoreError::Stale);
            }
        }
        let model = api_token::ActiveModel {
            id: Set(new.id),
            user_id: Set(new.user_id),
            name: Set(new.name),
            plane: Set(new.plane.as_str().to_owned()),
            prefix: Set(new.prefix),
            token_hash: Set(new.token_hash.to_vec()),
            created_by: Set(Some(new.created_by)),
            created_at: Set(new.created_at),
            expires_at: Set(new.expires_at),
            revoked_at: Set(None),
        }
        .insert(&txn)
        .stored()
        .await?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(token_info(model))
    }

    async fn revoke_token(
        &self,
        id: Uuid,
        owner: Option<Uuid>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let mut update = api_token::Entity::update_many()
            .col_expr(api_token::Column::RevokedAt, Expr::value(now))
            .filter(api_token::Column::Id.eq(id))
            .filter(api_token::Column::RevokedAt.is_null());
        if let Some(owner) = owner {
            update = update.filter(api_token::Column::UserId.eq(owner));
        }
        if update.exec(&txn).stored().await?.rows_affected == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }
}
