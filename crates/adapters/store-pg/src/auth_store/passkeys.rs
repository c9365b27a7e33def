//! Passkeys and WebAuthn ceremonies (`svc.passkeys`,
//! `svc.webauthn_challenges`). A ceremony is deleted as it is read, so a
//! second answer to one challenge (on any instance) finds nothing; a
//! passkey's counter moves by compare-and-set.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{
    NewCeremony, NewPasskey, NewSession, PasskeyAdded, PasskeyInfo, PasskeySignIn, PasskeyStore,
    StoredPasskey, User,
};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use sea_orm::FromQueryResult;
use uuid::Uuid;

use super::gate::{SESSION_FACTOR_SQL, lock_gate};
use super::mfa::record_sql;
use super::statements::user_from_row;
use crate::query::{Begin, Commit, Query};
use crate::{PgStore, commit_with_audit, execute, rows, stmt};

/// A row of `svc.passkeys` as its owner sees it.
#[derive(FromQueryResult)]
struct PasskeyRow {
    id: Uuid,
    name: String,
    credential_id: Vec<u8>,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
}

/// A ceremony taken, with the passkey its answer names (columns null when
/// there is none).
#[derive(FromQueryResult)]
struct LoginRow {
    state: serde_json::Value,
    id: Option<Uuid>,
    user_id: Option<Uuid>,
    credential: Option<serde_json::Value>,
    sign_count: Option<i64>,
}

/// Takes the live sign-in ceremony `$1` (at `$2`) and reads the passkey
/// `$3` of the user `$4` beside it, in one round trip.
const TAKE_LOGIN_SQL: &str = "WITH c AS (DELETE FROM svc.webauthn_challenges \
        WHERE token_hash = $1 AND kind = 'login' AND expires_at > $2 RETURNING state) \
    SELECT c.state, p.id, p.user_id, p.credential, p.sign_count \
    FROM c LEFT JOIN svc.passkeys p ON p.credential_id = $3 AND p.user_id = $4";

/// Stores the ceremony `$1`..`$6` (a registration: `$3` its account;
/// `$5` now), unless it is a sign-in and `$7` sign-ins are stored. Up to
/// 100 expired ceremonies go (those no other start is deleting: no waits,
/// no lock order), and the account's older registration.
const START_CEREMONY_SQL: &str = "WITH expired AS (DELETE FROM svc.webauthn_challenges \
        WHERE token_hash IN (SELECT token_hash FROM svc.webauthn_challenges \
            WHERE expires_at <= $5 LIMIT 100 FOR UPDATE SKIP LOCKED)), \
    replaced AS (DELETE FROM svc.webauthn_challenges WHERE kind = 'register' AND user_id = $3) \
    INSERT INTO svc.webauthn_challenges (token_hash, kind, user_id, state, expires_at) \
    SELECT $1, $2, $3, $4, $6 \
    WHERE $2 = 'register' OR (SELECT count(*) FROM (SELECT 1 FROM svc.webauthn_challenges \
        WHERE kind = 'login' AND expires_at > $5 LIMIT $7) live) < $7";

/// The user of the live challenge `$1` (at `$2`, its password unchanged)
/// with its passkeys' credentials.
const CHALLENGE_PASSKEYS_SQL: &str = "SELECT c.user_id, \
        coalesce(array_agg(p.credential) FILTER (WHERE p.id IS NOT NULL), '{}') AS credentials \
    FROM svc.mfa_challenges c JOIN svc.users u ON u.id = c.user_id \
    LEFT JOIN svc.passkeys p ON p.user_id = c.user_id \
    WHERE c.token_hash = $1 AND c.used_at IS NULL AND c.expires_at > $2 AND c.attempts < 5 \
      AND (c.checked_hash IS NULL OR u.password_hash = c.checked_hash) \
    GROUP BY c.user_id";

/// Stores the passkey ceremony `$1` of a challenge of `$2` (state `$3`,
/// until `$4`), replacing an older one of it; up to 100 ceremonies expired
/// at `$5` go.
const PARK_CHALLENGE_SQL: &str = "WITH expired AS (DELETE FROM svc.webauthn_challenges \
        WHERE token_hash IN (SELECT token_hash FROM svc.webauthn_challenges \
            WHERE expires_at <= $5 LIMIT 100 FOR UPDATE SKIP LOCKED)) \
    INSERT INTO svc.webauthn_challenges (token_hash, kind, user_id, state, expires_at) \
    SELECT $1, 'mfa', u.id, $3, $4 FROM svc.users u WHERE u.id = $2 \
    ON CONFLICT (token_hash) DO UPDATE SET state = EXCLUDED.state, expires_at = EXCLUDED.expires_at \
    WHERE svc.webauthn_challenges.kind = 'mfa' AND svc.webauthn_challenges.user_id = EXCLUDED.user_id";

/// Takes the live passkey ceremony `$1` of a challenge of `$4` (at `$2`)
/// and reads that user's passkey `$3` beside it.
const TAKE_CHALLENGE_SQL: &str = "WITH c AS (DELETE FROM svc.webauthn_challenges \
        WHERE token_hash = $1 AND kind = 'mfa' AND user_id = $4 AND expires_at > $2 RETURNING state) \
    SELECT c.state, p.id, p.user_id, p.credential, p.sign_count \
    FROM c LEFT JOIN svc.passkeys p ON p.credential_id = $3 AND p.user_id = $4";

/// Locks the account `$1` against a concurrent claim (API.md 16) and
/// answers whether it may sign in: active, with API access, and with a
/// verified email when `$2`.
const PASSKEY_ACCOUNT_SQL: &str = "SELECT EXISTS (SELECT 1 FROM svc.role_members m \
        JOIN svc.roles r ON r.id = m.role_id WHERE m.user_id = u.id AND r.api_access) \
        AND u.active AND (u.email_verified OR NOT $2) AS ok \
    FROM svc.users u WHERE u.id = $1 FOR SHARE OF u";

/// A ceremony's state taken, with the passkey its answer names, if any.
fn taken_ceremony(
    row: &sea_orm::QueryResult,
) -> Result<(serde_json::Value, Option<StoredPasskey>), StoreError> {
    let r = rows::row::<LoginRow>(row)?;
    let passkey = match (r.id, r.user_id, r.credential, r.sign_count) {
        (Some(id), Some(user_id), Some(credential), Some(sign_count)) => Some(StoredPasskey {
            id,
            user_id,
            credential,
            sign_count,
        }),
        _ => None,
    };
    Ok((r.state, passkey))
}

#[async_trait]
impl PasskeyStore for PgStore {
    async fn passkeys(&self, user_id: Uuid) -> Result<Vec<PasskeyInfo>, StoreError> {
        let found = self
            .db
            .fetch_all(stmt(
                "SELECT id, name, credential_id, created_at, last_used_at FROM svc.passkeys \
                 WHERE user_id = $1 ORDER BY created_at, id",
                [user_id.into()],
            ))
            .await?;
        found
            .iter()
            .map(|row| {
                let r = rows::row::<PasskeyRow>(row)?;
                Ok(PasskeyInfo {
                    id: r.id,
                    name: r.name,
                    credential_id: r.credential_id,
                    created_at: r.created_at,
                    last_used_at: r.last_used_at,
                })
            })
            .collect()
    }

    async fn start_ceremony(
        &self,
        ceremony: NewCeremony,
        limit: u32,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let kind = if ceremony.user_id.is_some() {
            "register"
        } else {
            "login"
        };
        let stored = execute(
            &self.db,
            START_CEREMONY_SQL,
            [
                ceremony.token_hash.to_vec().into(),
                kind.into(),
                ceremony.user_id.into(),
                ceremony.state.into(),
                now.into(),
                ceremony.expires_at.into(),
                i64::from(limit).into(),
            ],
        )
        .await?;
        Ok(stored == 1)
    }

    async fn take_registration(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "DELETE FROM svc.webauthn_challenges WHERE token_hash = $1 \
                 AND kind = 'register' AND user_id = $2 AND expires_at > $3 RETURNING state",
                [hash.to_vec().into(), user_id.into(), now.into()],
            ))
            .await?;
        row.map(|row| rows::column(&row, "state")).transpose()
    }

    async fn add_passkey(
        &self,
        passkey: NewPasskey,
        limit: u32,
        event: AuditEvent,
    ) -> Result<PasskeyAdded, StoreError> {
        let txn = self.db.open_txn().await?;
        // Judged under the account's lock: two registrations (or a TOTP
        // enabled meanwhile) count one after the other.
        let gate = lock_gate(
            &txn,
            passkey.user_id,
            Some(passkey.session_id),
            passkey.info.created_at,
        )
        .await?;
        if !gate.session_live {
            return Ok(PasskeyAdded::SessionEnded);
        }
        if !gate.allows_adding() {
            return Ok(PasskeyAdded::Refused(gate.gate()));
        }
        if gate.passkeys >= i64::from(limit) {
            return Ok(PasskeyAdded::TooMany);
        }
        let info = passkey.info;
        let added = execute(
            &txn,
            "INSERT INTO svc.passkeys (id, user_id, credential_id, name, credential, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (credential_id) DO NOTHING",
            [
                info.id.into(),
                passkey.user_id.into(),
                info.credential_id.into(),
                info.name.into(),
                passkey.credential.into(),
                info.created_at.into(),
            ],
        )
        .await?;
        if added == 0 {
            return Ok(PasskeyAdded::Taken);
        }
        execute(
            &txn,
            SESSION_FACTOR_SQL,
            [
                passkey.session_id.into(),
                passkey.user_id.into(),
                "passkey".into(),
            ],
        )
        .await?;
        commit_with_audit(txn, event, info.created_at).await?;
        Ok(PasskeyAdded::Added)
    }

    async fn take_login(
        &self,
        hash: &[u8; 32],
        credential_id: &[u8],
        user_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<(serde_json::Value, Option<StoredPasskey>)>, StoreError> {
        take_ceremony(self, TAKE_LOGIN_SQL, hash, (credential_id, user_id), now).await
    }

    async fn challenge_passkeys(
        &self,
        hash: &[u8; 32],
        now: DateTime<Utc>,
    ) -> Result<Option<(Uuid, Vec<serde_json::Value>)>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                CHALLENGE_PASSKEYS_SQL,
                [hash.to_vec().into(), now.into()],
            ))
            .await?;
        row.map(|row| {
            Ok((
                rows::column(&row, "user_id")?,
                rows::column(&row, "credentials")?,
            ))
        })
        .transpose()
    }

    async fn park_challenge_ceremony(
        &self,
        ceremony: NewCeremony,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let stored = execute(
            &self.db,
            PARK_CHALLENGE_SQL,
            [
                ceremony.token_hash.to_vec().into(),
                ceremony.user_id.into(),
                ceremony.state.into(),
                ceremony.expires_at.into(),
                now.into(),
            ],
        )
        .await?;
        Ok(stored == 1)
    }

    async fn take_challenge_ceremony(
        &self,
        hash: &[u8; 32],
        user_id: Uuid,
        credential_id: &[u8],
        now: DateTime<Utc>,
    ) -> Result<Option<(serde_json::Value, Option<StoredPasskey>)>, StoreError> {
        take_ceremony(
            self,
            TAKE_CHALLENGE_SQL,
            hash,
            (credential_id, user_id),
            now,
        )
        .await
    }

    async fn sign_in_with_passkey(
        &self,
        used: PasskeySignIn,
        session: NewSession,
        now: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<User>, StoreError> {
        let user_id = used.passkey.user_id;
        let txn = self.db.open_txn().await?;
        let may = txn
            .fetch_optional(stmt(
                PASSKEY_ACCOUNT_SQL,
                [user_id.into(), used.require_verified.into()],
            ))
            .await?;
        let may = match may {
            Some(row) => rows::column::<bool>(&row, "ok")?,
            None => false,
        };
        // Not committed on refusal: the transaction rolls back when dropped.
        if !may {
            return Ok(None);
        }
        let moved = execute(
            &txn,
            "UPDATE svc.passkeys SET credential = $3, sign_count = $4, last_used_at = $5 \
             WHERE id = $1 AND sign_count = $2",
            [
                used.passkey.id.into(),
                used.passkey.sign_count.into(),
                used.credential.into(),
                used.sign_count.into(),
                now.into(),
            ],
        )
        .await?;
        if moved == 0 {
            return Ok(None);
        }
        let row = txn
            .fetch_optional(record_sql(Some(session), user_id, event, now))
            .await?
            .ok_or_else(|| StoreError::Internal("a signed-in user was not found".into()))?;
        txn.commit_txn().await?;
        Ok(Some(user_from_row(&row, "id")?))
    }

    async fn delete_passkey(
        &self,
        user_id: Uuid,
        id: Uuid,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let removed = execute(
            &txn,
            "DELETE FROM svc.passkeys WHERE id = $1 AND user_id = $2",
            [id.into(), user_id.into()],
        )
        .await?;
        if removed == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }
}

/// Takes the ceremony of `hash` with `sql` (a sign-in's or a challenge's),
/// with the passkey `credential_id` of `user_id` when the account has it.
async fn take_ceremony(
    store: &PgStore,
    sql: &str,
    hash: &[u8; 32],
    (credential_id, user_id): (&[u8], Uuid),
    now: DateTime<Utc>,
) -> Result<Option<(serde_json::Value, Option<StoredPasskey>)>, StoreError> {
    let row = store
        .db
        .fetch_optional(stmt(
            sql,
            [
                hash.to_vec().into(),
                now.into(),
                credential_id.to_vec().into(),
                user_id.into(),
            ],
        ))
        .await?;
    row.map(|row| taken_ceremony(&row)).transpose()
}
