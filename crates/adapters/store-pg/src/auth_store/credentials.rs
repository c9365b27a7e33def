//! Credentials and sessions: a bearer resolved with its user in one round
//! trip, a sign-in's candidate and its failures, sessions made and ended.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{
    CredentialKind, CredentialRecord, CredentialStore, FailureEffect, LoginCandidate, NewSession,
    SessionInfo, User,
};
use chrono::{DateTime, Utc};
use kernel::{StoreError, Versions};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use super::statements::{CandidateRow, credential_record, insert_session_row, user_from_row};
use crate::entity::{session, user};
use crate::query::{Begin, Query, Stored};
use crate::{PgStore, commit_with_audit, execute, rows, stmt, versions_of};

#[async_trait]
impl CredentialStore for PgStore {
    async fn credential(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
    ) -> Result<(Versions, Option<CredentialRecord>), StoreError> {
        let row = self.credential_row(kind, hash, false).await?;
        Ok((versions_of(&row, "v_")?, credential_record(&row)?))
    }

    async fn credential_with_user(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
    ) -> Result<(Versions, Option<(CredentialRecord, User)>), StoreError> {
        let row = self.credential_row(kind, hash, true).await?;
        let found = match credential_record(&row)? {
            Some(record) => Some((record, user_from_row(&row, "user_id")?)),
            None => None,
        };
        Ok((versions_of(&row, "v_")?, found))
    }

    async fn login_candidate(
        &self,
        email: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<LoginCandidate>, StoreError> {
        // The count is taken on the row's latest version (UPDATE waits for
        // concurrent ones), so simultaneous attempts get distinct numbers. It
        // commits without waiting for the WAL flush, as the rate limit does:
        // a known email must not take longer than an unknown one (a crash of
        // PostgreSQL can forget the last counts, never double them).
        let sql = "WITH counted AS (UPDATE svc.users SET failed_sign_ins = failed_sign_ins + 1 \
                   WHERE lower(email) = lower($1) AND (locked_until IS NULL OR locked_until <= $2) \
                   RETURNING failed_sign_ins) \
                   SELECT set_config('synchronous_commit', 'off', true) AS no_flush, \
                   u.id, u.password_hash, u.active, u.email_verified, \
                   coalesce((SELECT failed_sign_ins FROM counted), 0) AS attempt, \
                   NOT EXISTS (SELECT 1 FROM counted) AS locked, \
                   coalesce(bool_or(r.api_access), false) AS api_access, \
                   coalesce(bool_or(r.admin_access), false) AS admin, \
                   EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = u.id AND t.secret IS NOT NULL) AS totp, \
                   EXISTS (SELECT 1 FROM svc.passkeys p WHERE p.user_id = u.id) AS passkey \
                   FROM svc.users u LEFT JOIN svc.role_members m ON m.user_id = u.id LEFT JOIN svc.roles r ON r.id = m.role_id \
                   WHERE lower(u.email) = lower($1) GROUP BY u.id";
        let Some(row) = self
            .db
            .fetch_optional(stmt(sql, [email.into(), now.into()]))
            .await?
        else {
            return Ok(None);
        };
        let r = rows::row::<CandidateRow>(&row)?;
        Ok(Some(LoginCandidate {
            user_id: r.id,
            password_hash: r.password_hash,
            active: r.active,
            email_verified: r.email_verified,
            attempt: r.attempt,
            locked: r.locked,
            api_access: r.api_access,
            totp: r.totp,
            passkey: r.passkey,
            admin: r.admin,
        }))
    }

    async fn take_attempt(&self, key: &str, limit: u32) -> Result<Option<u64>, StoreError> {
        self.take_rate_attempt(key, limit).await
    }

    async fn record_login_failure(
        &self,
        user_id: Option<Uuid>,
        effect: FailureEffect,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        match (user_id, effect) {
            (Some(id), FailureEffect::Lock { at, until }) => {
                execute(
                    &txn,
                    "UPDATE svc.users SET locked_until = $2, failed_sign_ins = 0 \
                     WHERE id = $1 AND (locked_until IS NULL OR locked_until <= $3)",
                    [id.into(), until.into(), at.into()],
                )
                .await?;
            }
            (Some(id), FailureEffect::Reset) => {
                execute(
                    &txn,
                    "UPDATE svc.users SET failed_sign_ins = 0 WHERE id = $1",
                    [id.into()],
                )
                .await?;
            }
            _ => {}
        }
        commit_with_audit(txn, event, self.now()).await
    }

    async fn create_session(
        &self,
        new: NewSession,
        checked_hash: &str,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        // The lockout cleared only while the password is still the one
        // checked; the row's lock is held to the commit: a change of the
        // password (or its removal by a provider's claim, which locks the row
        // first) waits for the session to exist and then ends it, or it came
        // first and nothing is stored. Concurrent sign-ins of one account
        // queue on the row as before (one lock mode, no upgrade, no deadlock).
        let cleared = execute(
            &txn,
            "UPDATE svc.users SET failed_sign_ins = 0, locked_until = NULL \
             WHERE id = $1 AND password_hash = $2",
            [new.user_id.into(), checked_hash.into()],
        )
        .await?;
        if cleared == 0 {
            return Ok(false);
        }
        insert_session_row(&txn, new).await?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }

    async fn end_session(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let ended = session::Entity::update_many()
            .col_expr(session::Column::RevokedAt, Expr::value(now))
            .filter(session::Column::Id.eq(session_id))
            .filter(session::Column::UserId.eq(user_id))
            .filter(session::Column::RevokedAt.is_null())
            .filter(session::Column::ExpiresAt.gt(now))
            .exec(&txn)
            .stored()
            .await?
            .rows_affected;
        if ended == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }

    async fn sessions(
        &self,
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        let rows = session::Entity::find()
            .filter(session::Column::UserId.eq(user_id))
            .filter(session::Column::RevokedAt.is_null())
            .filter(session::Column::ExpiresAt.gt(now))
            .order_by_desc(session::Column::CreatedAt)
            .all(&self.db)
            .stored()
            .await?;
        Ok(rows
            .into_iter()
            .map(|s| SessionInfo {
                id: s.id,
                created_at: s.created_at,
                expires_at: s.expires_at,
                ip: s.ip,
                user_agent: s.user_agent,
            })
            .collect())
    }

    async fn password_hash(&self, user_id: Uuid) -> Result<Option<Option<String>>, StoreError> {
        Ok(user::Entity::find_by_id(user_id)
            .one(&self.db)
            .stored()
            .await?
            .map(|u| u.password_hash))
    }
}
