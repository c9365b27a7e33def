//! One-time tokens, invitations and the email outbox rows they queue.

use audit::{Actor, AuditEvent};
use auth::email::EmailTemplate;
use auth::{Invitation, TokenMail};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, Set,
};
use uuid::Uuid;

use crate::db::Db;
use crate::entity::{email_outbox, invitation, one_time_token, session, user};
use crate::query::{Begin, Query, Stored};
use crate::{add_memberships, commit_with_audit, rows, stmt};

/// An email template's texts.
#[derive(FromQueryResult)]
struct TemplateRow {
    subject: String,
    body_text: String,
    body_html: String,
}

/// Whom a used one-time token was for.
#[derive(FromQueryResult)]
struct UsedTokenRow {
    user_id: Option<Uuid>,
    invitation_id: Option<Uuid>,
}

/// Stores a one-time token and the email carrying its link.
pub(crate) async fn insert_mail(
    conn: &impl ConnectionTrait,
    mail: TokenMail,
) -> Result<(), StoreError> {
    let t = mail.token;
    // A new sign-in code ends the older ones of its user.
    if let (Some(_), Some(user_id)) = (t.code_hash, t.user_id) {
        conn.run(stmt(
            "UPDATE svc.one_time_tokens SET used_at = $2 \
             WHERE user_id = $1 AND kind = 'code' AND used_at IS NULL",
            [user_id.into(), t.created_at.into()],
        ))
        .await?;
    }
    one_time_token::ActiveModel {
        id: Set(t.id),
        kind: Set(t.kind.as_str().to_owned()),
        token_hash: Set(t.token_hash.to_vec()),
        user_id: Set(t.user_id),
        invitation_id: Set(t.invitation_id),
        created_at: Set(t.created_at),
        expires_at: Set(t.expires_at),
        used_at: Set(None),
        code_hash: Set(t.code_hash.map(|h| h.to_vec())),
        attempts: Set(0),
    }
    .insert(conn)
    .stored()
    .await?;
    let e = mail.email;
    let template = conn
        .fetch_optional(stmt(
            "SELECT subject, body_text, body_html FROM svc.email_templates WHERE kind = $1",
            [e.kind.into()],
        ))
        .await?
        .ok_or_else(|| StoreError::Internal(format!("no email template of kind {}", e.kind)))?;
    let template = rows::row::<TemplateRow>(&template)?;
    let rendered = e.render(&EmailTemplate {
        subject: template.subject,
        body_text: template.body_text,
        body_html: template.body_html,
    });
    email_outbox::ActiveModel {
        id: Set(e.id),
        to_address: Set(e.to),
        kind: Set(e.kind.to_owned()),
        subject: Set(rendered.subject),
        body_text: Set(rendered.body_text),
        body_html: Set(rendered.body_html),
        link: Set(Some(e.link)),
        created_at: Set(t.created_at),
        sent_at: Set(None),
        logged_at: Set(None),
        attempts: Set(0),
        next_attempt_at: Set(t.created_at),
        last_error: Set(None),
    }
    .insert(conn)
    .stored()
    .await?;
    Ok(())
}

/// Whether a token of `kind` with this hash is unused and unexpired at `now`.
pub(crate) async fn token_live(
    conn: &impl ConnectionTrait,
    hash: &[u8; 32],
    kind: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let row = conn
        .fetch_optional(stmt(
            "SELECT 1 AS live FROM svc.one_time_tokens \
             WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3",
            [hash.to_vec().into(), kind.into(), now.into()],
        ))
        .await?;
    Ok(row.is_some())
}

/// Reset, verification and sign-in code emails queued for `address` in the hour before
/// `now`, counted under a lock of the address held to the end of the
/// transaction, so that concurrent senders on any instance count one by one.
pub(crate) async fn emails_last_hour(
    txn: &impl ConnectionTrait,
    address: &str,
    now: DateTime<Utc>,
) -> Result<i64, StoreError> {
    txn.run(stmt(
        "SELECT pg_advisory_xact_lock(hashtextextended('svc.email_outbox:' || lower($1), 0))",
        [address.into()],
    ))
    .await?;
    let row = txn
        .fetch_optional(stmt(
            "SELECT count(*) AS sent FROM svc.email_outbox \
             WHERE lower(to_address) = lower($1) AND kind IN ('reset', 'verify', 'code') \
               AND created_at > $2 - interval '1 hour'",
            [address.into(), now.into()],
        ))
        .await?
        .ok_or_else(|| StoreError::Internal("count answered no row".into()))?;
    rows::column(&row, "sent")
}

/// Marks a live token of `kind` used; answers its user and invitation.
async fn use_token(
    conn: &impl ConnectionTrait,
    kind: &str,
    hash: &[u8; 32],
    now: DateTime<Utc>,
) -> Result<Option<(Option<Uuid>, Option<Uuid>)>, StoreError> {
    let row = conn
        .fetch_optional(stmt(
            "UPDATE svc.one_time_tokens SET used_at = $3 \
             WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 \
             RETURNING user_id, invitation_id",
            [hash.to_vec().into(), kind.into(), now.into()],
        ))
        .await?;
    row.map(|r| {
        let used = rows::row::<UsedTokenRow>(&r)?;
        Ok((used.user_id, used.invitation_id))
    })
    .transpose()
}

fn with_actor(mut event: AuditEvent, user_id: Uuid) -> AuditEvent {
    event.actor = Actor::user(user_id);
    event.target = Some(format!("user:{user_id}"));
    event
}

/// Uses a reset token: new password, lockout cleared, every session ended.
pub(crate) async fn redeem_reset(
    db: &Db,
    hash: &[u8; 32],
    password_hash: String,
    now: DateTime<Utc>,
    event: AuditEvent,
) -> Result<Option<Uuid>, StoreError> {
    let txn = db.open_txn().await?;
    let Some((Some(user_id), _)) = use_token(&txn, "reset", hash, now).await? else {
        return Ok(None);
    };
    // The reset proves the address: an account whose email was never
    // verified is claimed first, so whoever registered it keeps no way in
    // (passkeys and tokens included).
    crate::auth_store::claim_unverified(&txn, user_id, "password_reset", now).await?;
    user::Entity::update_many()
        .col_expr(user::Column::PasswordHash, Expr::value(password_hash))
        .col_expr(user::Column::FailedSignIns, Expr::value(0))
        .col_expr(
            user::Column::LockedUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(user::Column::UpdatedAt, Expr::value(now))
        .filter(user::Column::Id.eq(user_id))
        .exec(&txn)
        .stored()
        .await?;
    session::Entity::update_many()
        .col_expr(session::Column::RevokedAt, Expr::value(now))
        .filter(session::Column::UserId.eq(user_id))
        .filter(session::Column::RevokedAt.is_null())
        .exec(&txn)
        .stored()
        .await?;
    commit_with_audit(txn, with_actor(event, user_id), now).await?;
    Ok(Some(user_id))
}

/// Uses a verification token: the email counts as verified.
pub(crate) async fn redeem_verification(
    db: &Db,
    hash: &[u8; 32],
    now: DateTime<Utc>,
    event: AuditEvent,
) -> Result<Option<Uuid>, StoreError> {
    let txn = db.open_txn().await?;
    let Some((Some(user_id), _)) = use_token(&txn, "verify", hash, now).await? else {
        return Ok(None);
    };
    user::Entity::update_many()
        .col_expr(user::Column::EmailVerified, Expr::value(true))
        .col_expr(user::Column::UpdatedAt, Expr::value(now))
        .filter(user::Column::Id.eq(user_id))
        .exec(&txn)
        .stored()
        .await?;
    commit_with_audit(txn, with_actor(event, user_id), now).await?;
    Ok(Some(user_id))
}

/// Uses an invitation token: the invited account is created, verified, with its roles.
pub(crate) async fn redeem_invitation(
    db: &Db,
    hash: &[u8; 32],
    password_hash: String,
    now: DateTime<Utc>,
    event: AuditEvent,
) -> Result<Option<Uuid>, StoreError> {
    let txn = db.open_txn().await?;
    let Some((_, Some(invitation_id))) = use_token(&txn, "invite", hash, now).await? else {
        return Ok(None);
    };
    let Some(invite) = invitation::Entity::find_by_id(invitation_id)
        .one(&txn)
        .stored()
        .await?
    else {
        return Ok(None);
    };
    if invite.accepted_at.is_some() {
        return Ok(None);
    }
    let user_id = kernel::new_id();
    user::ActiveModel {
        id: Set(user_id),
        email: Set(invite.email.clone()),
        password_hash: Set(Some(password_hash)),
        name: Set(invite.name.clone()),
        email_verified: Set(true),
        active: Set(true),
        timezone: Set(None),
        failed_sign_ins: Set(0),
        locked_until: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(&txn)
    .stored()
    .await?;
    // Roles deleted since the invitation was sent are skipped.
    let existing: Vec<Uuid> = crate::entity::role::Entity::find()
        .filter(crate::entity::role::Column::Id.is_in(invite.role_ids.clone()))
        .all(&txn)
        .stored()
        .await?
        .into_iter()
        .map(|r| r.id)
        .collect();
    add_memberships(&txn, user_id, &existing, now).await?;
    let mut accepted: invitation::ActiveModel = invite.into();
    accepted.accepted_at = Set(Some(now));
    accepted.update(&txn).stored().await?;
    commit_with_audit(txn, with_actor(event, user_id), now).await?;
    Ok(Some(user_id))
}

fn to_invitation(m: invitation::Model) -> Invitation {
    Invitation {
        id: m.id,
        email: m.email,
        name: m.name,
        role_ids: m.role_ids,
        invited_by: m.invited_by,
        created_at: m.created_at,
        expires_at: m.expires_at,
    }
}

/// Pending invitations, newest first.
pub(crate) async fn invitations(
    db: &Db,
    now: DateTime<Utc>,
) -> Result<Vec<Invitation>, StoreError> {
    let rows = invitation::Entity::find()
        .filter(invitation::Column::AcceptedAt.is_null())
        .filter(invitation::Column::ExpiresAt.gt(now))
        .order_by_desc(invitation::Column::CreatedAt)
        .all(db)
        .stored()
        .await?;
    Ok(rows.into_iter().map(to_invitation).collect())
}

/// Stores an invitation, its token and its email; refuses an email that has an account.
pub(crate) async fn create_invitation(
    db: &Db,
    new: Invitation,
    mail: TokenMail,
    event: AuditEvent,
    now: DateTime<Utc>,
) -> Result<Invitation, StoreError> {
    let txn = db.open_txn().await?;
    let taken = txn
        .fetch_optional(stmt(
            "SELECT 1 AS one FROM svc.users WHERE lower(email) = lower($1)",
            [new.email.clone().into()],
        ))
        .await?
        .is_some();
    if taken {
        return Err(StoreError::conflict(
            "email",
            "an account with this email exists",
        ));
    }
    let known = crate::entity::role::Entity::find()
        .filter(crate::entity::role::Column::Id.is_in(new.role_ids.clone()))
        .all(&txn)
        .stored()
        .await?
        .len();
    let mut distinct = new.role_ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if known != distinct.len() {
        return Err(kernel::FieldError::new("roleIds", "contains an unknown role id").into());
    }
    let model = invitation::ActiveModel {
        id: Set(new.id),
        email: Set(new.email),
        name: Set(new.name),
        role_ids: Set(distinct),
        invited_by: Set(new.invited_by),
        created_at: Set(new.created_at),
        expires_at: Set(new.expires_at),
        accepted_at: Set(None),
    }
    .insert(&txn)
    .stored()
    .await?;
    insert_mail(&txn, mail).await?;
    commit_with_audit(txn, event, now).await?;
    Ok(to_invitation(model))
}

/// Deletes a pending invitation (its token goes with it).
pub(crate) async fn delete_invitation(
    db: &Db,
    id: Uuid,
    event: AuditEvent,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let txn = db.open_txn().await?;
    let deleted = invitation::Entity::delete_many()
        .filter(invitation::Column::Id.eq(id))
        .filter(invitation::Column::AcceptedAt.is_null())
        .exec(&txn)
        .stored()
        .await?
        .rows_affected;
    if deleted == 0 {
        return Ok(false);
    }
    commit_with_audit(txn, event, now).await?;
    Ok(true)
}
