//! Second factors and sign-in challenges (`svc.user_totp`,
//! `svc.mfa_recovery_codes`, `svc.mfa_challenges`). A code is used by a
//! compare-and-set in the transaction that acts on it, so two requests
//! with one code (on any instances) cannot both pass.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{
    EmailCodeLookup, EmailCodeOutcome, FactorGate, Lockout, MfaChallengeRecord, MfaFailure,
    MfaFinish, MfaProof, MfaSettle, MfaStore, NewMfaChallenge, NewSession, SignInMethod,
    TotpEnabled, TotpRecord,
};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::{ConnectionTrait, FromQueryResult};
use uuid::Uuid;

use super::gate::{SESSION_FACTOR_SQL, lock_gate, read_gate};
use super::statements::{USER_SELECT, user_from_row};
use crate::query::{Begin, Commit, Query};
use crate::{PgStore, commit_with_audit, execute, rows, stmt};

/// A row of `svc.user_totp`.
#[derive(FromQueryResult)]
struct TotpRow {
    secret: Option<Vec<u8>>,
    pending_secret: Option<Vec<u8>>,
    last_step: Option<i64>,
}

/// A live challenge, its attempt counted, with its user's TOTP.
#[derive(FromQueryResult)]
struct ChallengeRow {
    user_id: Uuid,
    secret: Option<Vec<u8>>,
    last_step: Option<i64>,
    attempt: i32,
    locked: bool,
    method: String,
}

/// Counts an attempt at the challenge whose hash is `$1` (at `$2`) while it
/// is live and its password is the one checked, and at its account's
/// sign-in attempts unless a lock is in force: both before any code is
/// looked at, so however many codes run at once, each is numbered.
const TAKE_CHALLENGE_SQL: &str = "WITH c AS ( \
        UPDATE svc.mfa_challenges c SET attempts = attempts + 1 \
        WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < 5 \
          AND EXISTS (SELECT 1 FROM svc.users x WHERE x.id = c.user_id \
                      AND (c.checked_hash IS NULL OR x.password_hash = c.checked_hash)) \
        RETURNING user_id, method), \
    counted AS ( \
        UPDATE svc.users SET failed_sign_ins = failed_sign_ins + 1 \
        WHERE id = (SELECT user_id FROM c) AND (locked_until IS NULL OR locked_until <= $2) \
        RETURNING failed_sign_ins) \
    SELECT c.user_id, c.method, t.secret, t.last_step, \
        coalesce((SELECT failed_sign_ins FROM counted), 0) AS attempt, \
        NOT EXISTS (SELECT 1 FROM counted) AS locked \
    FROM c LEFT JOIN svc.user_totp t ON t.user_id = c.user_id";

/// A challenge's TOTP proof (`$4` the step) for `$3` used, as a first
/// CTE `p` of [`SETTLE_CHALLENGE`].
const SETTLE_TOTP: &str = "WITH p AS (UPDATE svc.user_totp SET last_step = $4 WHERE user_id = $3 \
    AND secret IS NOT NULL AND (last_step IS NULL OR last_step < $4) RETURNING user_id), ";

/// A challenge's recovery code (`$4` its hash) for `$3` used, as a first
/// CTE `p` of [`SETTLE_CHALLENGE`].
const SETTLE_RECOVERY: &str = "WITH p AS (UPDATE svc.mfa_recovery_codes SET used_at = $2 \
    WHERE user_id = $3 AND code_hash = $4 AND used_at IS NULL \
      AND EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = $3 AND t.secret IS NOT NULL) \
    RETURNING user_id), ";

/// A challenge's passkey assertion for `$3` used: the passkey `$4`'s
/// counter moved from `$5` to `$6` by compare-and-set, its credential now
/// `$7`, as a first CTE `p` of [`SETTLE_CHALLENGE`].
const SETTLE_PASSKEY: &str = "WITH p AS (UPDATE svc.passkeys SET sign_count = $6, credential = $7, \
    last_used_at = $2 WHERE id = $4 AND user_id = $3 AND sign_count = $5 RETURNING user_id), ";

/// After a proof `p`: the challenge `$1` of `$3` used (its attempt was
/// counted: at most the fifth), and the account's row locked to the commit
/// with its lockout cleared, only while the password is the one the first
/// factor checked, no lock is in force at `$2` and the account may still
/// sign in. Answers whether the proof held and the challenge was live.
const SETTLE_CHALLENGE: &str = "c AS (UPDATE svc.mfa_challenges SET used_at = $2 \
        WHERE token_hash = $1 AND user_id = $3 AND used_at IS NULL AND expires_at > $2 \
          AND attempts <= 5 RETURNING user_id, checked_hash), \
    u AS (UPDATE svc.users u SET failed_sign_ins = 0, locked_until = NULL FROM c \
        WHERE u.id = c.user_id AND (c.checked_hash IS NULL OR u.password_hash = c.checked_hash) \
          AND (u.locked_until IS NULL OR u.locked_until <= $2) AND u.active \
          AND EXISTS (SELECT 1 FROM svc.role_members m JOIN svc.roles r ON r.id = m.role_id \
                      WHERE m.user_id = u.id AND r.api_access) \
        RETURNING u.id) \
    SELECT EXISTS (SELECT 1 FROM p) AS proved, EXISTS (SELECT 1 FROM u) AS live";

/// The settle's second statement: the session stored (when there is one),
/// the event audited, and the user read, whatever the outcome.
pub(super) fn record_sql(
    session: Option<NewSession>,
    user_id: Uuid,
    event: AuditEvent,
    now: DateTime<Utc>,
) -> sea_orm::Statement {
    let audit = "a AS (INSERT INTO svc.audit_log (id, at, actor_type, actor_id, action, target, details, ip) \
        VALUES ($2, $3, $4, $5, $6, $7, $8, $9))";
    let mut values: Vec<sea_orm::Value> = vec![
        user_id.into(),
        kernel::new_id().into(),
        now.into(),
        event.actor.kind.as_str().into(),
        event.actor.id.into(),
        event.action.into(),
        event.target.into(),
        (!event.details.is_null()).then_some(event.details).into(),
        event.ip.into(),
    ];
    let session_cte = match session {
        Some(s) => {
            values.extend([
                s.id.into(),
                s.token_hash.to_vec().into(),
                s.created_at.into(),
                s.expires_at.into(),
                s.ip.into(),
                s.user_agent.into(),
                s.method.as_str().into(),
                s.factor.map(|f| f.as_str()).into(),
            ]);
            ", s AS (INSERT INTO svc.sessions (id, user_id, token_hash, created_at, expires_at, ip, user_agent, method, factor, factor_seq) \
                VALUES ($10, $1, $11, $12, $13, $14, $15, $16, $17, \
                        CASE WHEN $17::text IS NOT NULL THEN nextval('svc.factor_seq') END))"
        }
        None => "",
    };
    stmt(
        &format!("WITH {audit}{session_cte} {USER_SELECT} WHERE u.id = $1 GROUP BY u.id"),
        values,
    )
}

/// Uses `proof` for `user_id` in `txn`: a TOTP step later than the last
/// one accepted, or an unused recovery code. False when it was used.
async fn use_proof(
    txn: &impl ConnectionTrait,
    user_id: Uuid,
    proof: MfaProof,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let used = match proof {
        MfaProof::Totp { step } => {
            execute(
                txn,
                "UPDATE svc.user_totp SET last_step = $2 WHERE user_id = $1 \
                 AND secret IS NOT NULL AND (last_step IS NULL OR last_step < $2)",
                [user_id.into(), step.into()],
            )
            .await?
        }
        MfaProof::Recovery { hash } => {
            execute(
                txn,
                "UPDATE svc.mfa_recovery_codes SET used_at = $3 \
                 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL \
                 AND EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = $1 AND t.secret IS NOT NULL)",
                [user_id.into(), hash.to_vec().into(), now.into()],
            )
            .await?
        }
        // Turning TOTP off takes a TOTP or recovery code only.
        MfaProof::Passkey(_) => 0,
    };
    Ok(used == 1)
}

#[async_trait]
impl MfaStore for PgStore {
    async fn totp(&self, user_id: Uuid) -> Result<Option<TotpRecord>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT secret, pending_secret, last_step FROM svc.user_totp WHERE user_id = $1",
                [user_id.into()],
            ))
            .await?;
        row.map(|row| {
            let r = rows::row::<TotpRow>(&row)?;
            Ok(TotpRecord {
                secret: r.secret,
                pending_secret: r.pending_secret,
                last_step: r.last_step,
            })
        })
        .transpose()
    }

    async fn factor_gate(
        &self,
        user_id: Uuid,
        session_id: Option<Uuid>,
    ) -> Result<FactorGate, StoreError> {
        Ok(read_gate(&self.db, user_id, session_id, self.now())
            .await?
            .gate())
    }

    async fn set_pending_totp(
        &self,
        user_id: Uuid,
        secret: Vec<u8>,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let stored = execute(
            &txn,
            "INSERT INTO svc.user_totp (user_id, pending_secret) VALUES ($1, $2) \
             ON CONFLICT (user_id) DO UPDATE SET pending_secret = EXCLUDED.pending_secret \
             WHERE svc.user_totp.secret IS NULL",
            [user_id.into(), secret.into()],
        )
        .await?;
        if stored == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }

    async fn enable_totp(
        &self,
        user_id: Uuid,
        session_id: Option<Uuid>,
        secret: &[u8],
        step: i64,
        recovery: Vec<[u8; 32]>,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<TotpEnabled, StoreError> {
        let txn = self.db.open_txn().await?;
        let gate = lock_gate(&txn, user_id, session_id, now).await?;
        if session_id.is_some() && !gate.session_live {
            return Ok(TotpEnabled::SessionEnded);
        }
        if !gate.allows_adding() {
            return Ok(TotpEnabled::Refused(gate.gate()));
        }
        let enabled = execute(
            &txn,
            "UPDATE svc.user_totp SET secret = pending_secret, pending_secret = NULL, \
             last_step = $3, enabled_at = $4, seq = nextval('svc.factor_seq') \
             WHERE user_id = $1 AND pending_secret = $2 AND secret IS NULL",
            [
                user_id.into(),
                secret.to_vec().into(),
                step.into(),
                now.into(),
            ],
        )
        .await?;
        if enabled == 0 {
            return Ok(TotpEnabled::PendingChanged);
        }
        let hashes: Vec<Vec<u8>> = recovery.iter().map(|h| h.to_vec()).collect();
        execute(
            &txn,
            "DELETE FROM svc.mfa_recovery_codes WHERE user_id = $1",
            [user_id.into()],
        )
        .await?;
        execute(
            &txn,
            "INSERT INTO svc.mfa_recovery_codes (user_id, code_hash) \
             SELECT $1, unnest($2::bytea[])",
            [user_id.into(), hashes.into()],
        )
        .await?;
        if let Some(session_id) = session_id {
            execute(
                &txn,
                SESSION_FACTOR_SQL,
                [session_id.into(), user_id.into(), "totp".into()],
            )
            .await?;
        }
        commit_with_audit(txn, event, now).await?;
        Ok(TotpEnabled::Enabled)
    }

    async fn disable_totp(
        &self,
        user_id: Uuid,
        proof: MfaProof,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        if !use_proof(&txn, user_id, proof, now).await? {
            return Ok(false);
        }
        execute(
            &txn,
            "WITH cleared AS (UPDATE svc.users SET failed_sign_ins = 0 WHERE id = $1) \
             DELETE FROM svc.user_totp WHERE user_id = $1",
            [user_id.into()],
        )
        .await?;
        execute(
            &txn,
            "DELETE FROM svc.mfa_recovery_codes WHERE user_id = $1",
            [user_id.into()],
        )
        .await?;
        commit_with_audit(txn, event, now).await?;
        Ok(true)
    }

    async fn reset_mfa(&self, user_id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        let now = self.now();
        let txn = self.db.open_txn().await?;
        // The person's row first, in a statement of its own: a sign-in or an
        // enrolment that commits meanwhile is then seen by the deletes below
        // (each statement reads what committed before it).
        let locked = txn
            .fetch_optional(stmt(
                "SELECT 1 AS found FROM svc.users WHERE id = $1 FOR UPDATE",
                [user_id.into()],
            ))
            .await?;
        if locked.is_none() {
            return Ok(false);
        }
        execute(
            &txn,
            "WITH totp AS (DELETE FROM svc.user_totp WHERE user_id = $1), \
             codes AS (DELETE FROM svc.mfa_recovery_codes WHERE user_id = $1), \
             sessions AS (UPDATE svc.sessions SET revoked_at = $2 \
                 WHERE user_id = $1 AND revoked_at IS NULL), \
             challenges AS (DELETE FROM svc.mfa_challenges WHERE user_id = $1), \
             passkeys AS (DELETE FROM svc.passkeys WHERE user_id = $1) \
             DELETE FROM svc.webauthn_challenges WHERE user_id = $1",
            [user_id.into(), now.into()],
        )
        .await?;
        commit_with_audit(txn, event, now).await?;
        Ok(true)
    }

    async fn create_mfa_challenge(
        &self,
        challenge: NewMfaChallenge,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        // A user's challenges that ended are cleared as new ones come.
        execute(
            &txn,
            "WITH ended AS (DELETE FROM svc.mfa_challenges WHERE user_id = $3 \
                 AND (used_at IS NOT NULL OR expires_at <= $5 OR attempts >= 5)) \
             INSERT INTO svc.mfa_challenges \
             (id, token_hash, user_id, checked_hash, created_at, expires_at, method) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [
                challenge.id.into(),
                challenge.token_hash.to_vec().into(),
                challenge.user_id.into(),
                challenge.checked_hash.into(),
                challenge.created_at.into(),
                challenge.expires_at.into(),
                challenge.method.as_str().into(),
            ],
        )
        .await?;
        commit_with_audit(txn, event, challenge.created_at).await
    }

    async fn take_mfa_attempt(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
    ) -> Result<Option<MfaChallengeRecord>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(TAKE_CHALLENGE_SQL, [hash.to_vec().into(), now.into()]))
            .await?;
        row.map(|row| {
            let r = rows::row::<ChallengeRow>(&row)?;
            Ok(MfaChallengeRecord {
                user_id: r.user_id,
                secret: r.secret,
                last_step: r.last_step,
                attempt: i64::from(r.attempt),
                locked: r.locked,
                method: SignInMethod::parse(&r.method),
            })
        })
        .transpose()
    }

    async fn take_code_attempt(
        &self,
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "UPDATE svc.users SET failed_sign_ins = failed_sign_ins + 1 \
                 WHERE id = $1 AND (locked_until IS NULL OR locked_until <= $2) \
                 RETURNING failed_sign_ins",
                [user_id.into(), now.into()],
            ))
            .await?;
        row.map(|row| rows::column::<i32>(&row, "failed_sign_ins").map(i64::from))
            .transpose()
    }

    async fn settle_mfa(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        settle: MfaSettle,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<MfaFinish, StoreError> {
        let txn = self.db.open_txn().await?;
        let session = match settle {
            MfaSettle::Proof { proof, session } => {
                let mut values: Vec<sea_orm::Value> =
                    vec![hash.to_vec().into(), now.into(), user_id.into()];
                let cas = match proof {
                    MfaProof::Totp { step } => {
                        values.push(step.into());
                        SETTLE_TOTP
                    }
                    MfaProof::Recovery { hash } => {
                        values.push(hash.to_vec().into());
                        SETTLE_RECOVERY
                    }
                    MfaProof::Passkey(used) => {
                        values.extend([
                            used.id.into(),
                            used.sign_count.into(),
                            used.new_count.into(),
                            used.credential.into(),
                        ]);
                        SETTLE_PASSKEY
                    }
                };
                let row = txn
                    .fetch_optional(stmt(&format!("{cas}{SETTLE_CHALLENGE}"), values))
                    .await?
                    .ok_or_else(|| StoreError::Internal("the settle answered no row".into()))?;
                // Not committed: the transaction rolls back when dropped.
                if !rows::column::<bool>(&row, "live")? {
                    return Ok(MfaFinish::Gone);
                }
                if !rows::column::<bool>(&row, "proved")? {
                    return Ok(MfaFinish::Refused);
                }
                Some(session)
            }
            MfaSettle::Wrong(failure) => {
                let until = match failure {
                    MfaFailure::Lock { until } => Some(until),
                    MfaFailure::Keep => None,
                };
                // The rows a right code writes are written as they are, so
                // that a wrong code costs what a right one does.
                execute(
                    &txn,
                    "WITH c AS (UPDATE svc.mfa_challenges SET attempts = attempts WHERE token_hash = $4), \
                     p AS (UPDATE svc.user_totp SET last_step = last_step WHERE user_id = $1) \
                     UPDATE svc.users SET locked_until = coalesce($2, locked_until), \
                     failed_sign_ins = CASE WHEN $2 IS NULL THEN failed_sign_ins ELSE 0 END \
                     WHERE id = $1 AND (locked_until IS NULL OR locked_until <= $3)",
                    [user_id.into(), until.into(), now.into(), hash.to_vec().into()],
                )
                .await?;
                None
            }
        };
        let signed_in = session.is_some();
        let row = txn
            .fetch_optional(record_sql(session, user_id, event, now))
            .await?;
        txn.commit_txn().await?;
        match (signed_in, row) {
            (true, Some(row)) => Ok(MfaFinish::Done(user_from_row(&row, "id")?)),
            (true, None) => Err(StoreError::Internal(
                "a signed-in user was not found".into(),
            )),
            (false, _) => Ok(MfaFinish::Refused),
        }
    }

    async fn redeem_email_code(
        &self,
        lookup: EmailCodeLookup,
        admins_need_factor: bool,
        session: NewSession,
        now: DateTime<Utc>,
        lockout: Lockout,
        event: AuditEvent,
    ) -> Result<EmailCodeOutcome, StoreError> {
        super::email_codes::redeem(
            self,
            lookup,
            admins_need_factor,
            session,
            now,
            lockout,
            event,
        )
        .await
    }

    async fn refuse_mfa_code(
        &self,
        user_id: Uuid,
        effect: MfaFailure,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<(), StoreError> {
        let txn = self.db.open_txn().await?;
        if let MfaFailure::Lock { until } = effect {
            execute(
                &txn,
                "UPDATE svc.users SET locked_until = $2, failed_sign_ins = 0 \
                 WHERE id = $1 AND (locked_until IS NULL OR locked_until <= $3)",
                [user_id.into(), until.into(), now.into()],
            )
            .await?;
        }
        commit_with_audit(txn, event, now).await
    }
}
