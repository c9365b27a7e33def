use async_trait::async_trait;
use audit::AuditEvent;
use auth::{
    AuthStore, CredentialKind, CredentialRecord, FailureEffect, Invitation, LoginCandidate,
    NewSession, NewToken, NewUser, RoleRef, SessionInfo, TokenInfo, TokenMail, User, UserChanges,
    UserPage,
};
use chrono::{DateTime, Utc};
use kernel::{FieldError, StoreError, Versions};
use permissions::Plane;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QueryResult, Set, TransactionTrait, Value,
};
use uuid::Uuid;

use crate::entity::{api_token, role_member, session, user};
use crate::{
    PgStore, add_memberships, commit_with_audit, ensure_admin_remains, execute, is_active_admin,
    map_err, stmt, versions_of, write_audit,
};

/// The user's own columns (`u`) with its role names (`r`), as a user is shown.
macro_rules! user_columns {
    () => {
        "u.email, u.name, u.email_verified, u.created_at, \
         coalesce(json_agg(json_build_object('id', r.id, 'name', r.name) ORDER BY r.name) FILTER (WHERE r.id IS NOT NULL), '[]') AS roles"
    };
}

/// What the user's roles (`r`) let it do.
macro_rules! access_columns {
    () => {
        "coalesce(bool_or(r.api_access), false) AS api_access, coalesce(bool_or(r.admin_access), false) AS admin"
    };
}

/// The roles (`r`) of the user `u`.
macro_rules! role_joins {
    () => {
        "LEFT JOIN svc.role_members m ON m.user_id = u.id LEFT JOIN svc.roles r ON r.id = m.role_id"
    };
}

/// Columns of a user with its roles and access flags; each query adds its
/// condition and grouping.
const USER_SELECT: &str = concat!(
    "SELECT u.id, u.active, u.timezone, ",
    user_columns!(),
    ", ",
    access_columns!(),
    " FROM svc.users u ",
    role_joins!()
);

/// The credential resolver's query: credential, user state and roles in one round trip.
/// The credential behind `$1` (a hash), beside the shared state's versions:
/// always one row, whose credential columns are NULL when there is none.
/// `$extra` adds columns of the user (`u`) and its roles (`r`).
macro_rules! credential_sql {
    ($table:literal, $plane:literal) => {
        credential_sql!($table, $plane, "")
    };
    ($table:literal, $plane:literal, $extra:expr) => {
        concat!(
            "SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, k.* ",
            "FROM svc.cache_version v LEFT JOIN LATERAL (",
            "SELECT c.id, c.user_id, c.expires_at, c.revoked_at IS NOT NULL AS revoked, ",
            $plane,
            " AS plane, ",
            "u.active, u.timezone, ",
            "coalesce(array_agg(r.id) FILTER (WHERE r.id IS NOT NULL), '{}') AS role_ids, ",
            access_columns!(),
            $extra,
            " FROM ",
            $table,
            " c JOIN svc.users u ON u.id = c.user_id ",
            role_joins!(),
            " WHERE c.token_hash = $1 GROUP BY c.id, u.id) k ON true"
        )
    };
}
const SESSION_CREDENTIAL_SQL: &str = credential_sql!("svc.sessions", "NULL::text");
const TOKEN_CREDENTIAL_SQL: &str = credential_sql!("svc.api_tokens", "c.plane");
// With the user's own columns beside the credential's, for `GET /api/auth/me`.
const SESSION_USER_SQL: &str =
    credential_sql!("svc.sessions", "NULL::text", concat!(", ", user_columns!()));
const TOKEN_USER_SQL: &str =
    credential_sql!("svc.api_tokens", "c.plane", concat!(", ", user_columns!()));

/// Takes an attempt of `$1` under the limit `$2` (`svc.take_rate`), and clears
/// up to 100 windows that ended; answers 0 or the seconds to wait.
const TAKE_ATTEMPT_SQL: &str = "WITH ended AS ( \
        DELETE FROM svc.rate_limits WHERE key IN (SELECT key FROM svc.rate_limits \
            WHERE last_at < now() - interval '61 seconds' AND key <> $1 ORDER BY last_at LIMIT 100 FOR UPDATE SKIP LOCKED)) \
    SELECT svc.take_rate($1, $2) AS wait";

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
            .query_one_raw(stmt(
                credential_sql(kind, with_user),
                [hash.to_vec().into()],
            ))
            .await
            .map_err(map_err)?
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
            .query_one_raw(stmt(
                TAKE_ATTEMPT_SQL,
                [key.into(), i64::from(limit).into()],
            ))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("the attempt statement answered no row".into()))?;
        let wait: i64 = row.try_get("", "wait").map_err(map_err)?;
        Ok((wait > 0).then(|| u64::try_from(wait).unwrap_or(1)))
    }
}

/// The credential resolver's query for `kind`, with the whole user when
/// `with_user`; its one parameter `$1` is the secret's hash.
fn credential_sql(kind: CredentialKind, with_user: bool) -> &'static str {
    match (kind, with_user) {
        (CredentialKind::Session, false) => SESSION_CREDENTIAL_SQL,
        (CredentialKind::Token, false) => TOKEN_CREDENTIAL_SQL,
        (CredentialKind::Session, true) => SESSION_USER_SQL,
        (CredentialKind::Token, true) => TOKEN_USER_SQL,
    }
}

/// The credential of a row of the credential resolver's query, if any.
fn credential_record(row: &QueryResult) -> Result<Option<CredentialRecord>, StoreError> {
    let Some(id) = row.try_get("", "id").map_err(map_err)? else {
        return Ok(None);
    };
    let plane: Option<String> = row.try_get("", "plane").map_err(map_err)?;
    Ok(Some(CredentialRecord {
        id,
        user_id: row.try_get("", "user_id").map_err(map_err)?,
        expires_at: row.try_get("", "expires_at").map_err(map_err)?,
        revoked: row.try_get("", "revoked").map_err(map_err)?,
        plane: plane.as_deref().and_then(Plane::parse),
        user_active: row.try_get("", "active").map_err(map_err)?,
        role_ids: row.try_get("", "role_ids").map_err(map_err)?,
        api_access: row.try_get("", "api_access").map_err(map_err)?,
        admin: row.try_get("", "admin").map_err(map_err)?,
        timezone: row.try_get("", "timezone").map_err(map_err)?,
    }))
}

/// A user of a row whose `id_column` holds the user's id.
fn user_from_row(row: &QueryResult, id_column: &str) -> Result<User, StoreError> {
    let get_err = |e: sea_orm::DbErr| StoreError::Internal(e.to_string());
    let roles: serde_json::Value = row.try_get("", "roles").map_err(get_err)?;
    let roles = roles
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|r| {
                    Some(RoleRef {
                        id: r.get("id")?.as_str()?.parse().ok()?,
                        name: r.get("name")?.as_str()?.to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(User {
        id: row.try_get("", id_column).map_err(get_err)?,
        email: row.try_get("", "email").map_err(get_err)?,
        name: row.try_get("", "name").map_err(get_err)?,
        email_verified: row.try_get("", "email_verified").map_err(get_err)?,
        active: row.try_get("", "active").map_err(get_err)?,
        timezone: row.try_get("", "timezone").map_err(get_err)?,
        created_at: row.try_get("", "created_at").map_err(get_err)?,
        roles,
        api_access: row.try_get("", "api_access").map_err(get_err)?,
        admin: row.try_get("", "admin").map_err(get_err)?,
    })
}

async fn load_user(conn: &impl ConnectionTrait, id: Uuid) -> Result<Option<User>, StoreError> {
    load_user_where(conn, "u.id = $1", id.into()).await
}

/// The one user matching `condition` on its `$1`.
async fn load_user_where(
    conn: &impl ConnectionTrait,
    condition: &str,
    value: Value,
) -> Result<Option<User>, StoreError> {
    let sql = format!("{USER_SELECT} WHERE {condition} GROUP BY u.id");
    let row = conn
        .query_one_raw(stmt(&sql, [value]))
        .await
        .map_err(map_err)?;
    row.as_ref().map(|row| user_from_row(row, "id")).transpose()
}

/// Stores a new session and clears its user's failed sign-in counter and lock.
pub(crate) async fn insert_session(
    txn: &impl ConnectionTrait,
    new: NewSession,
) -> Result<(), StoreError> {
    let user_id = new.user_id;
    insert_session_row(txn, new).await?;
    user::Entity::update_many()
        .col_expr(user::Column::FailedSignIns, Expr::value(0))
        .col_expr(
            user::Column::LockedUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(user::Column::Id.eq(user_id))
        .exec(txn)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Stores the session row alone.
async fn insert_session_row(txn: &impl ConnectionTrait, new: NewSession) -> Result<(), StoreError> {
    session::ActiveModel {
        id: Set(new.id),
        user_id: Set(new.user_id),
        token_hash: Set(new.token_hash.to_vec()),
        created_at: Set(new.created_at),
        expires_at: Set(new.expires_at),
        revoked_at: Set(None),
        ip: Set(new.ip),
        user_agent: Set(new.user_agent),
    }
    .insert(txn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Stores a new user with its roles.
pub(crate) async fn insert_user(
    txn: &impl ConnectionTrait,
    new: &NewUser,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    user::ActiveModel {
        id: Set(new.id),
        email: Set(new.email.as_str().to_owned()),
        password_hash: Set(new.password_hash.clone()),
        name: Set(new.name.clone()),
        email_verified: Set(new.email_verified),
        active: Set(true),
        timezone: Set(new.timezone.clone()),
        failed_sign_ins: Set(0),
        locked_until: Set(None),
        created_at: Set(new.created_at),
        updated_at: Set(new.created_at),
    }
    .insert(txn)
    .await
    .map_err(map_err)?;
    set_roles(txn, new.id, &new.role_ids, now).await?;
    Ok(())
}

/// Replaces a user's roles; an unknown role id is an invalid field.
async fn set_roles(
    conn: &impl ConnectionTrait,
    user_id: Uuid,
    role_ids: &[Uuid],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    role_member::Entity::delete_many()
        .filter(role_member::Column::UserId.eq(user_id))
        .exec(conn)
        .await
        .map_err(map_err)?;
    if role_ids.is_empty() {
        return Ok(());
    }
    let known = conn
        .query_one_raw(stmt(
            "SELECT count(*) AS n FROM svc.roles WHERE id = ANY($1)",
            [Value::from(role_ids.to_vec())],
        ))
        .await
        .map_err(map_err)?
        .map(|r| r.try_get::<i64>("", "n"))
        .transpose()
        .map_err(map_err)?
        .unwrap_or(0);
    let mut distinct = role_ids.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if usize::try_from(known).unwrap_or(0) != distinct.len() {
        return Err(FieldError::new("roleIds", "contains an unknown role id").into());
    }
    add_memberships(conn, user_id, &distinct, now).await
}

fn token_info(model: api_token::Model) -> TokenInfo {
    TokenInfo {
        id: model.id,
        user_id: model.user_id,
        name: model.name,
        plane: Plane::parse(&model.plane).unwrap_or(Plane::Api),
        prefix: model.prefix,
        created_at: model.created_at,
        expires_at: model.expires_at,
    }
}

fn like_pattern(search: &str) -> String {
    let escaped = search
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
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
                   coalesce(bool_or(r.api_access), false) AS api_access \
                   FROM svc.users u LEFT JOIN svc.role_members m ON m.user_id = u.id LEFT JOIN svc.roles r ON r.id = m.role_id \
                   WHERE lower(u.email) = lower($1) GROUP BY u.id";
        let Some(row) = self
            .db
            .query_one_raw(stmt(sql, [email.into(), now.into()]))
            .await
            .map_err(map_err)?
        else {
            return Ok(None);
        };
        Ok(Some(LoginCandidate {
            user_id: row.try_get("", "id").map_err(map_err)?,
            password_hash: row.try_get("", "password_hash").map_err(map_err)?,
            active: row.try_get("", "active").map_err(map_err)?,
            email_verified: row.try_get("", "email_verified").map_err(map_err)?,
            attempt: row.try_get("", "attempt").map_err(map_err)?,
            locked: row.try_get("", "locked").map_err(map_err)?,
            api_access: row.try_get("", "api_access").map_err(map_err)?,
        }))
    }

    async fn record_login_failure(
        &self,
        user_id: Option<Uuid>,
        effect: FailureEffect,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
            .query_all_raw(stmt(&sql, [pattern.clone(), limit.into(), offset.into()]))
            .await
            .map_err(map_err)?;
        let users = rows
            .iter()
            .map(|row| user_from_row(row, "id"))
            .collect::<Result<Vec<_>, _>>()?;
        let count_sql = format!("SELECT count(*) AS n FROM svc.users u {filter}");
        let total: i64 = self
            .db
            .query_one_raw(stmt(&count_sql, [pattern]))
            .await
            .map_err(map_err)?
            .map(|r| r.try_get("", "n"))
            .transpose()
            .map_err(map_err)?
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
        let rows = self
            .db
            .query_all_raw(stmt(&sql, [role_id.into()]))
            .await
            .map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
        insert_user(&txn, &new, self.now()).await?;
        if let Some(mail) = mail {
            crate::account_store::insert_mail(&txn, mail).await?;
        }
        write_audit(&txn, event, self.now()).await?;
        let user = load_user(&txn, new.id).await?.ok_or(StoreError::NotFound)?;
        txn.commit().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
        txn.commit().await.map_err(map_err)?;
        Ok(user)
    }

    async fn delete_user(&self, id: Uuid, event: AuditEvent) -> Result<(), StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
        let txn = self.db.begin().await.map_err(map_err)?;
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
