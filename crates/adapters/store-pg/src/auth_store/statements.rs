//! The statements and rows of users and credentials: the credential
//! resolver's query, a user with its roles, and the writes that several
//! stores share (a new user, a new session).

use auth::{
    CredentialKind, CredentialRecord, Factors, NewSession, NewUser, RoleRef, TokenInfo, User,
};
use chrono::{DateTime, Utc};
use kernel::{FieldError, StoreError};
use permissions::Plane;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter,
    QueryResult, Set, Value,
};
use uuid::Uuid;

use crate::entity::{api_token, role_member, session, user};
use crate::query::{Query, Stored};
use crate::{add_memberships, rows, stmt};

/// The user's own columns (`u`) with its role names (`r`), as a user is shown.
macro_rules! user_columns {
    () => {
        "u.email, u.name, u.email_verified, u.created_at, \
         EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = u.id AND t.secret IS NOT NULL) AS mfa_totp, \
         (SELECT count(*) FROM svc.passkeys p WHERE p.user_id = u.id) AS mfa_passkeys, \
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
pub(super) const USER_SELECT: &str = concat!(
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
/// `$factor` says whether the credential proved a second factor that the
/// account still has.
macro_rules! credential_sql {
    ($table:literal, $plane:literal, $factor:expr) => {
        credential_sql!($table, $plane, $factor, "")
    };
    ($table:literal, $plane:literal, $factor:expr, $extra:expr) => {
        concat!(
            "SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, k.* ",
            "FROM svc.cache_version v LEFT JOIN LATERAL (",
            "SELECT c.id, c.user_id, c.expires_at, c.revoked_at IS NOT NULL AS revoked, ",
            $plane,
            " AS plane, ",
            "u.active, u.timezone, ",
            $factor,
            " AS session_factor, ",
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
pub(super) const SESSION_CREDENTIAL_SQL: &str =
    credential_sql!("svc.sessions", "NULL::text", session_factor!("c", "u.id"));
pub(super) const TOKEN_CREDENTIAL_SQL: &str = credential_sql!("svc.api_tokens", "c.plane", "false");
// With the user's own columns beside the credential's, for `GET /api/auth/me`.
pub(super) const SESSION_USER_SQL: &str = credential_sql!(
    "svc.sessions",
    "NULL::text",
    session_factor!("c", "u.id"),
    concat!(", ", user_columns!())
);
pub(super) const TOKEN_USER_SQL: &str = credential_sql!(
    "svc.api_tokens",
    "c.plane",
    "false",
    concat!(", ", user_columns!())
);

/// Takes an attempt of `$1` under the limit `$2` (`svc.take_rate`), and clears
/// up to 100 windows that ended; answers 0 or the seconds to wait.
pub(super) const TAKE_ATTEMPT_SQL: &str = "WITH ended AS ( \
        DELETE FROM svc.rate_limits WHERE key IN (SELECT key FROM svc.rate_limits \
            WHERE last_at < now() - interval '61 seconds' AND key <> $1 ORDER BY last_at LIMIT 100 FOR UPDATE SKIP LOCKED)) \
    SELECT svc.take_rate($1, $2) AS wait";

/// The credential resolver's query for `kind`, with the whole user when
/// `with_user`; its one parameter `$1` is the secret's hash.
pub(super) fn credential_sql(kind: CredentialKind, with_user: bool) -> &'static str {
    match (kind, with_user) {
        (CredentialKind::Session, false) => SESSION_CREDENTIAL_SQL,
        (CredentialKind::Token, false) => TOKEN_CREDENTIAL_SQL,
        (CredentialKind::Session, true) => SESSION_USER_SQL,
        (CredentialKind::Token, true) => TOKEN_USER_SQL,
    }
}

/// A row of the credential resolver's query: the credential, when there is
/// one, with its user's state and roles.
#[derive(FromQueryResult)]
pub(super) struct CredentialRow {
    id: Uuid,
    user_id: Uuid,
    expires_at: DateTime<Utc>,
    revoked: bool,
    plane: Option<String>,
    active: bool,
    role_ids: Vec<Uuid>,
    api_access: bool,
    admin: bool,
    timezone: Option<String>,
    session_factor: bool,
}

/// The credential of a row of the credential resolver's query, if any.
pub(super) fn credential_record(row: &QueryResult) -> Result<Option<CredentialRecord>, StoreError> {
    let Some(r) = rows::row::<Option<CredentialRow>>(row)? else {
        return Ok(None);
    };
    Ok(Some(CredentialRecord {
        id: r.id,
        user_id: r.user_id,
        expires_at: r.expires_at,
        revoked: r.revoked,
        plane: r.plane.as_deref().and_then(Plane::parse),
        user_active: r.active,
        role_ids: r.role_ids,
        api_access: r.api_access,
        admin: r.admin,
        timezone: r.timezone,
        session_factor: r.session_factor,
    }))
}

/// A user as [`USER_SELECT`] shows one, its id aside (in `id` or `user_id`).
#[derive(FromQueryResult)]
pub(super) struct UserRow {
    email: String,
    name: Option<String>,
    email_verified: bool,
    active: bool,
    timezone: Option<String>,
    created_at: DateTime<Utc>,
    mfa_totp: bool,
    mfa_passkeys: i64,
    roles: serde_json::Value,
    api_access: bool,
    admin: bool,
}

/// A user of a row whose `id_column` holds the user's id.
pub(super) fn user_from_row(row: &QueryResult, id_column: &str) -> Result<User, StoreError> {
    let r = rows::row::<UserRow>(row)?;
    let roles = r
        .roles
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
        id: rows::column(row, id_column)?,
        email: r.email,
        name: r.name,
        email_verified: r.email_verified,
        active: r.active,
        timezone: r.timezone,
        created_at: r.created_at,
        roles,
        api_access: r.api_access,
        admin: r.admin,
        mfa: Factors {
            totp: r.mfa_totp,
            passkeys: u32::try_from(r.mfa_passkeys).unwrap_or(u32::MAX),
        },
    })
}

pub(super) async fn load_user(
    conn: &impl ConnectionTrait,
    id: Uuid,
) -> Result<Option<User>, StoreError> {
    load_user_where(conn, "u.id = $1", id.into()).await
}

/// The one user matching `condition` on its `$1`.
pub(super) async fn load_user_where(
    conn: &impl ConnectionTrait,
    condition: &str,
    value: Value,
) -> Result<Option<User>, StoreError> {
    let sql = format!("{USER_SELECT} WHERE {condition} GROUP BY u.id");
    let row = conn.fetch_optional(stmt(&sql, [value])).await?;
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
        .stored()
        .await?;
    Ok(())
}

/// Stores the session row alone, as a session without a second factor:
/// one that proved a factor is stored by the challenge's own statement,
/// which orders it after its factors (`svc.factor_seq`).
pub(super) async fn insert_session_row(
    txn: &impl ConnectionTrait,
    new: NewSession,
) -> Result<(), StoreError> {
    debug_assert!(
        new.factor.is_none(),
        "a proven session is stored with its factor_seq"
    );
    session::ActiveModel {
        id: Set(new.id),
        user_id: Set(new.user_id),
        token_hash: Set(new.token_hash.to_vec()),
        created_at: Set(new.created_at),
        expires_at: Set(new.expires_at),
        revoked_at: Set(None),
        ip: Set(new.ip),
        user_agent: Set(new.user_agent),
        method: Set(new.method.as_str().to_owned()),
        factor: Set(None),
    }
    .insert(txn)
    .stored()
    .await?;
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
    .stored()
    .await?;
    set_roles(txn, new.id, &new.role_ids, now).await?;
    Ok(())
}

/// Replaces a user's roles; an unknown role id is an invalid field.
pub(super) async fn set_roles(
    conn: &impl ConnectionTrait,
    user_id: Uuid,
    role_ids: &[Uuid],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    role_member::Entity::delete_many()
        .filter(role_member::Column::UserId.eq(user_id))
        .exec(conn)
        .stored()
        .await?;
    if role_ids.is_empty() {
        return Ok(());
    }
    let known = conn
        .fetch_optional(stmt(
            "SELECT count(*) AS n FROM svc.roles WHERE id = ANY($1)",
            [Value::from(role_ids.to_vec())],
        ))
        .await?
        .map(|r| rows::column::<i64>(&r, "n"))
        .transpose()?
        .unwrap_or(0);
    let mut distinct = role_ids.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if usize::try_from(known).unwrap_or(0) != distinct.len() {
        return Err(FieldError::new("roleIds", "contains an unknown role id").into());
    }
    add_memberships(conn, user_id, &distinct, now).await
}

pub(super) fn token_info(model: api_token::Model) -> TokenInfo {
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

pub(super) fn like_pattern(search: &str) -> String {
    let escaped = search
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// The account a sign-in attempt names, with the attempt counted.
#[derive(FromQueryResult)]
pub(super) struct CandidateRow {
    pub(super) id: Uuid,
    pub(super) password_hash: Option<String>,
    pub(super) active: bool,
    pub(super) email_verified: bool,
    pub(super) attempt: i32,
    pub(super) locked: bool,
    pub(super) api_access: bool,
    pub(super) totp: bool,
    pub(super) passkey: bool,
    pub(super) admin: bool,
}

/// Marks user `$1`'s email verified when it was not, and then removes what
/// whoever registered the address before its owner could sign in with: the
/// password, passkeys (each signs in on its own), pending challenges and
/// ceremonies, and every session and token (at `$2`); answers one row when
/// it did. TOTP stays: removing it would let whoever controls the address
/// past an owner's own factor, so a TOTP the registrant set keeps the
/// owner at the challenge until an administrator resets it (closed, not
/// open).
const CLAIM_UNVERIFIED_SQL: &str = "WITH claimed AS ( \
         UPDATE svc.users SET email_verified = true, password_hash = NULL, updated_at = $2 \
         WHERE id = $1 AND NOT email_verified RETURNING id), \
     sessions AS (UPDATE svc.sessions SET revoked_at = $2 \
         WHERE user_id IN (SELECT id FROM claimed) AND revoked_at IS NULL), \
     tokens AS (UPDATE svc.api_tokens SET revoked_at = $2 \
         WHERE user_id IN (SELECT id FROM claimed) AND revoked_at IS NULL), \
     challenges AS (DELETE FROM svc.mfa_challenges WHERE user_id IN (SELECT id FROM claimed)), \
     passkeys AS (DELETE FROM svc.passkeys WHERE user_id IN (SELECT id FROM claimed)), \
     ceremonies AS (DELETE FROM svc.webauthn_challenges WHERE user_id IN (SELECT id FROM claimed)) \
     SELECT id FROM claimed";

/// Claims an account whose email was never verified for the person who
/// just proved they hold the address (`by`: a provider, or `email_code`),
/// in `txn`, audited (API.md 16); the row is locked first, so a sign-in
/// about to store a session finishes before and the claim ends it.
pub(crate) async fn claim_unverified(
    txn: &impl ConnectionTrait,
    user_id: Uuid,
    by: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    crate::execute(
        txn,
        "SELECT 1 FROM svc.users WHERE id = $1 FOR UPDATE",
        [user_id.into()],
    )
    .await?;
    let claimed = crate::execute(txn, CLAIM_UNVERIFIED_SQL, [user_id.into(), now.into()]).await?;
    if claimed > 0 {
        let event = audit::AuditEvent::new(
            audit::Actor::user(user_id),
            "auth.unverified_account_claimed",
            Some(format!("user:{user_id}")),
            None,
        )
        .with_details(serde_json::json!({ "provider": by }));
        crate::write_audit(txn, event, now).await?;
    }
    Ok(())
}
