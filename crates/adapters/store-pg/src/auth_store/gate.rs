//! The factor gate of API.md 17 (rule 3): whether an account has a second
//! factor, whether a session proved one, whether the address is verified.
//! A factor route reads it at the request; an enrolment reads it again
//! under the account's lock in the transaction that writes, so two
//! enrolments at once (on any instances) are judged one after the other.

use auth::FactorGate;
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::{ConnectionTrait, FromQueryResult};
use uuid::Uuid;

use crate::query::Query;
use crate::{rows, stmt};

/// Session `$s` (of user `$u`) proved a factor, and the account still has
/// one that existed when it did (API.md 21: a factor reset and set up
/// again is not what the session proved).
macro_rules! session_factor {
    ($s:literal, $u:literal) => {
        concat!(
            "(",
            $s,
            ".factor IS NOT NULL AND (EXISTS (SELECT 1 FROM svc.user_totp t ",
            "WHERE t.user_id = ",
            $u,
            " AND t.secret IS NOT NULL AND t.seq < ",
            $s,
            ".factor_seq) ",
            "OR EXISTS (SELECT 1 FROM svc.passkeys p WHERE p.user_id = ",
            $u,
            " AND p.seq < ",
            $s,
            ".factor_seq)))"
        )
    };
}

/// The gate of account `$1` with session `$2` at `$3`, and what an
/// enrolment counts beside it.
const GATE_SQL: &str = concat!(
    "SELECT \
        EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = u.id AND t.secret IS NOT NULL) \
        OR EXISTS (SELECT 1 FROM svc.passkeys p WHERE p.user_id = u.id) AS has_factor, \
        EXISTS (SELECT 1 FROM svc.sessions s WHERE s.id = $2 AND s.user_id = u.id AND ",
    session_factor!("s", "u.id"),
    ") AS session_factor, \
        u.email_verified, \
        (SELECT count(*) FROM svc.passkeys p WHERE p.user_id = u.id) AS passkeys, \
        EXISTS (SELECT 1 FROM svc.sessions s WHERE s.id = $2 AND s.user_id = u.id \
                AND s.revoked_at IS NULL AND s.expires_at > $3) AS session_live \
    FROM svc.users u WHERE u.id = $1"
);

/// Marks the session `$1` of `$2` as made with the factor `$3`, which it
/// has just enrolled (numbered after it, so it counts).
pub(super) const SESSION_FACTOR_SQL: &str = "UPDATE svc.sessions \
     SET factor = $3, factor_seq = nextval('svc.factor_seq') WHERE id = $1 AND user_id = $2";

/// The gate and the counts an enrolment needs, read in one statement.
#[derive(FromQueryResult)]
pub(super) struct GateRow {
    has_factor: bool,
    session_factor: bool,
    email_verified: bool,
    /// Passkeys the account holds.
    pub passkeys: i64,
    /// The session is neither revoked nor expired.
    pub session_live: bool,
}

impl GateRow {
    /// The gate as the domain reads it.
    pub fn gate(&self) -> FactorGate {
        FactorGate {
            has_factor: self.has_factor,
            session_factor: self.session_factor,
            email_verified: self.email_verified,
        }
    }

    /// Whether a factor may be added: the address verified, and either no
    /// factor yet or one proved by the session.
    pub fn allows_adding(&self) -> bool {
        self.email_verified && (!self.has_factor || self.session_factor)
    }
}

/// The gate of `user_id` with `session_id`, read now.
pub(super) async fn read_gate(
    db: &impl ConnectionTrait,
    user_id: Uuid,
    session_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<GateRow, StoreError> {
    let row = db
        .fetch_optional(stmt(
            GATE_SQL,
            [user_id.into(), session_id.into(), now.into()],
        ))
        .await?
        .ok_or(StoreError::NotFound)?;
    rows::row(&row)
}

/// Locks the account's row for the rest of the transaction, then reads its
/// gate in a statement of its own, so it sees every factor and session
/// change that committed while it waited.
pub(super) async fn lock_gate(
    txn: &impl ConnectionTrait,
    user_id: Uuid,
    session_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<GateRow, StoreError> {
    txn.fetch_optional(stmt(
        "SELECT 1 AS locked FROM svc.users WHERE id = $1 FOR NO KEY UPDATE",
        [user_id.into()],
    ))
    .await?
    .ok_or(StoreError::NotFound)?;
    read_gate(txn, user_id, session_id, now).await
}
