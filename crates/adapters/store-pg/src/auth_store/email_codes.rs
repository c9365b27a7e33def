//! Sign-in codes sent by email (`svc.one_time_tokens` of kind `code`): a
//! code is used or counted in the statement that looks at it, so two
//! requests with one code cannot both pass.

use audit::{Actor, AuditEvent};
use auth::{EmailCodeLookup, EmailCodeOutcome, Lockout, NewSession};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::FromQueryResult;
use uuid::Uuid;

use crate::query::{Begin, Commit, Query};
use crate::{PgStore, commit_with_audit, execute, rows, stmt};

/// The code of a live sign-in code, used when right, counted when wrong.
#[derive(FromQueryResult)]
struct RedeemedCodeRow {
    user_id: Uuid,
    right: bool,
}

/// Uses the live code of the account with email `$1`, when no lock is in
/// force, if its code is `$3` (at `$2`); else counts the wrong try, the 5th
/// ending it.
const REDEEM_CODE_SQL: &str = "WITH live AS ( \
        SELECT t.id, t.code_hash = sha256(t.token_hash || convert_to($3, 'UTF8')) AS right \
        FROM svc.one_time_tokens t JOIN svc.users u ON u.id = t.user_id \
        WHERE lower(u.email) = lower($1) AND t.kind = 'code' AND t.used_at IS NULL \
          AND t.expires_at > $2 AND t.attempts < 5 \
          AND (u.locked_until IS NULL OR u.locked_until <= $2) FOR UPDATE OF t) \
    UPDATE svc.one_time_tokens t \
    SET used_at = CASE WHEN live.right OR t.attempts + 1 >= 5 THEN $2 END, \
        attempts = t.attempts + CASE WHEN live.right THEN 0 ELSE 1 END \
    FROM live WHERE t.id = live.id RETURNING t.user_id, live.right";

/// Uses the live sign-in code whose link token hashes to `$1` (at `$2`).
const REDEEM_LINK_SQL: &str = "UPDATE svc.one_time_tokens SET used_at = $2 \
    WHERE token_hash = $1 AND kind = 'code' AND used_at IS NULL AND expires_at > $2 \
      AND attempts < 5 RETURNING user_id, true AS right";

/// Marks the email of `$1` verified when the account may sign in; answers
/// whether it goes on to a challenge: TOTP on, or (when `$2`) an
/// administrator with a passkey.
const CODE_ACCOUNT_SQL: &str = "UPDATE svc.users u SET email_verified = true \
    WHERE u.id = $1 AND u.active AND EXISTS (SELECT 1 FROM svc.role_members m \
        JOIN svc.roles r ON r.id = m.role_id WHERE m.user_id = u.id AND r.api_access) \
    RETURNING EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = u.id AND t.secret IS NOT NULL) \
        OR ($2 AND EXISTS (SELECT 1 FROM svc.passkeys p WHERE p.user_id = u.id) \
            AND EXISTS (SELECT 1 FROM svc.role_members m JOIN svc.roles r ON r.id = m.role_id \
                        WHERE m.user_id = u.id AND r.admin_access)) AS challenge";

/// Redeems a sign-in code by its link or by email and code: a wrong code
/// is counted at the code and at the account; a right one verifies the
/// email (claiming an account its owner never verified) and answers a
/// session, or a challenge when a second factor is due.
pub(super) async fn redeem(
    store: &PgStore,
    lookup: EmailCodeLookup,
    admins_need_factor: bool,
    mut session: NewSession,
    now: DateTime<Utc>,
    lockout: Lockout,
    mut event: AuditEvent,
) -> Result<EmailCodeOutcome, StoreError> {
    let txn = store.db.open_txn().await?;
    let statement = match lookup {
        EmailCodeLookup::Link { hash } => stmt(REDEEM_LINK_SQL, [hash.to_vec().into(), now.into()]),
        EmailCodeLookup::Code { email, code } => {
            stmt(REDEEM_CODE_SQL, [email.into(), now.into(), code.into()])
        }
    };
    let Some(row) = txn.fetch_optional(statement).await? else {
        return Ok(EmailCodeOutcome::Refused);
    };
    let redeemed = rows::row::<RedeemedCodeRow>(&row)?;
    let user_id = redeemed.user_id;
    if !redeemed.right {
        // The wrong try is counted, at the code and at the account.
        execute(
            &txn,
            "UPDATE svc.users SET \
             locked_until = CASE WHEN failed_sign_ins + 1 >= $2 THEN $3 ELSE locked_until END, \
             failed_sign_ins = CASE WHEN failed_sign_ins + 1 >= $2 THEN 0 ELSE failed_sign_ins + 1 END \
             WHERE id = $1",
            [user_id.into(), lockout.threshold.into(), lockout.until.into()],
        )
        .await?;
        txn.commit_txn().await?;
        return Ok(EmailCodeOutcome::Refused);
    }
    super::claim_unverified(&txn, user_id, "email_code", now).await?;
    let Some(account) = txn
        .fetch_optional(stmt(
            CODE_ACCOUNT_SQL,
            [user_id.into(), admins_need_factor.into()],
        ))
        .await?
    else {
        return Ok(EmailCodeOutcome::Refused);
    };
    if rows::column::<bool>(&account, "challenge")? {
        txn.commit_txn().await?;
        return Ok(EmailCodeOutcome::Challenge(user_id));
    }
    session.user_id = user_id;
    super::insert_session(&txn, session).await?;
    event.actor = Actor::user(user_id);
    commit_with_audit(txn, event, now).await?;
    Ok(EmailCodeOutcome::Session(user_id))
}
