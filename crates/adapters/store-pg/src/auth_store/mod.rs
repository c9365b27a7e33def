use async_trait::async_trait;
use audit::AuditEvent;
use auth::{
    AuthStore, CredentialKind, CredentialRecord, FailureEffect, Invitation, LoginCandidate,
    NewSession, NewToken, NewUser, SessionInfo, TokenInfo, TokenMail, User, UserChanges, UserPage,
};
use chrono::{DateTime, Utc};
use kernel::{StoreError, Versions};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QueryResult, Set, Value,
};
use uuid::Uuid;

mod email_codes;
mod gate;
mod mfa;
mod passkeys;
mod statements;

use self::statements::{
    CandidateRow, TAKE_ATTEMPT_SQL, USER_SELECT, credential_record, credential_sql,
    insert_session_row, like_pattern, load_user, load_user_where, set_roles, token_info,
    user_from_row,
};
pub(crate) use self::statements::{claim_unverified, insert_session, insert_user};
use crate::entity::{api_token, session, user};
use crate::query::{Begin, Commit, Query};
use crate::{
    PgStore, commit_with_audit, ensure_admin_remains, execute, is_active_admin, map_err, rows,
    stmt, versions_of, write_audit,
};

impl PgStore {
    /// The row of the credential resolver's query; the caches heed the
    /// versions it read.
    async fn credential_row(
        &self,
        kind: CredentialKind,
        hash: &[u8; 32],
        with_user: bool,
    ) -> Result<QueryResult, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                credential_sql(kind, with_user),
                [hash.to_vec().into()],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        self.seen.observe(versions_of(&row, "v_")?);
        Ok(row)
    }

    /// Takes an attempt of `key` under `limit` per 60 s for every instance;
    /// answers the seconds to wait when refused.
    pub(crate) async fn take_rate_attempt(
        &self,
        key: &str,
        limit: u32,
    ) -> Result<Option<u64>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                TAKE_ATTEMPT_SQL,
                [key.into(), i64::from(limit).into()],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("the attempt statement answered no row".into()))?;
        let wait: i64 = rows::column(&row, "wait")?;
        Ok((wait > 0).then(|| u64::try_from(wait).unwrap_or(1)))
    }
}

#[async_trait]
impl AuthStore for PgStore {
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

    async fn take_attempt(&self, key: &str, limit: u32) -> Result<Option<u64>, StoreError> {
        self.take_rate_attempt(key, limit).await
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
            .await
            .map_err(map_err)?
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
            .await
            .map_err(map_err)?;
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
                .await
                .map_err(map_err)?
                .is_none()
        {
            return Ok(None);
        }
        rows.iter()
            .map(|row| user_from_row(row, "id"))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn issue_mail(&self, mail: TokenMail, event: AuditEvent) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        crate::account_store::insert_mail(&txn, mail).await?;
        commit_with_audit(txn, event, self.now()).await
    }

    async fn issue_capped_mail(
        &self,
        mail: TokenMail,
        event: AuditEvent,
        dropped: AuditEvent,
        per_hour: u32,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let address = mail.email.to.clone();
        let sent = crate::account_store::emails_last_hour(&txn, &address, self.now()).await?;
        if sent >= i64::from(per_hour) {
            commit_with_audit(txn, dropped, self.now()).await?;
            return Ok(false);
        }
        crate::account_store::insert_mail(&txn, mail).await?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }

    async fn token_live(
        &self,
        hash: &[u8; 32],
        kind: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        crate::account_store::token_live(&self.db, hash, kind, now).await
    }

    async fn redeem_reset(
        &self,
        hash: &[u8; 32],
        password_hash: String,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError> {
        crate::account_store::redeem_reset(&self.db, hash, password_hash, now, event).await
    }

    async fn redeem_verification(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError> {
        crate::account_store::redeem_verification(&self.db, hash, now, event).await
    }

    async fn redeem_invitation(
        &self,
        hash: &[u8; 32],
        password_hash: String,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<Uuid>, StoreError> {
        crate::account_store::redeem_invitation(&self.db, hash, password_hash, now, event).await
    }

    async fn password_hash(&self, user_id: Uuid) -> Result<Option<Option<String>>, StoreError> {
        Ok(user::Entity::find_by_id(user_id)
            .one(&self.db)
            .await
            .map_err(map_err)?
            .map(|u| u.password_hash))
    }

    async fn invitations(&self, now: DateTime<Utc>) -> Result<Vec<Invitation>, StoreError> {
        crate::account_store::invitations(&self.db, now).await
    }

    async fn create_invitation(
        &self,
        invitation: Invitation,
        mail: TokenMail,
        event: AuditEvent,
    ) -> Result<Invitation, StoreError> {
        crate::account_store::create_invitation(&self.db, invitation, mail, event, self.now()).await
    }

    async fn delete_invitation(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        crate::account_store::delete_invitation(&self.db, id, event, self.now()).await
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
            .await
            .map_err(map_err)?
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
        row.update(&txn).await.map_err(map_err)?;
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
            end.exec(&txn).await.map_err(map_err)?;
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
            .await
            .map_err(map_err)?
            .rows_affected;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        if was_admin {
            ensure_admin_remains(&txn).await?;
        }
        commit_with_audit(txn, event, self.now()).await
    }

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
            .await
            .map_err(map_err)?;
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
        .await
        .map_err(map_err)?;
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
        if update.exec(&txn).await.map_err(map_err)?.rows_affected == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }
}
