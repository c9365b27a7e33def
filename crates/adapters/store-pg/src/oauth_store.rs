//! [`OAuthStore`]: pending provider flows and linked identities.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::NewSession;
use chrono::{DateTime, Utc};
use kernel::StoreError;
use oauth::{AccountMatch, Identity, OAuthStore, PendingFlow, SignInPlan};
use sea_orm::{ConnectionTrait, FromQueryResult, Value};
use uuid::Uuid;

use crate::auth_store::{claim_unverified, insert_session, insert_user};
use crate::query::{Begin, Commit, Query};
use crate::{PgStore, commit_with_audit, execute, rows, stmt, write_audit};

const IDENTITY_COLUMNS: &str =
    "i.id, i.user_id, i.provider, i.subject, i.email, i.created_at, i.last_used_at";

/// A row of [`IDENTITY_COLUMNS`].
#[derive(FromQueryResult)]
struct IdentityRow {
    id: Uuid,
    user_id: Uuid,
    provider: String,
    subject: String,
    email: Option<String>,
    created_at: DateTime<Utc>,
    last_used_at: DateTime<Utc>,
}

impl From<IdentityRow> for Identity {
    fn from(r: IdentityRow) -> Self {
        Self {
            id: r.id,
            user_id: r.user_id,
            provider: r.provider,
            subject: r.subject,
            email: r.email,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
        }
    }
}

/// A pending flow as taking it answers.
#[derive(FromQueryResult)]
struct FlowRow {
    provider: String,
    redirect_to: String,
    pkce_verifier: String,
    nonce: Option<String>,
    expires_at: DateTime<Utc>,
}

/// The account a provider's identity or email matches.
#[derive(FromQueryResult)]
struct AccountRow {
    id: Uuid,
    identity_id: Option<Uuid>,
    active: bool,
    api_access: bool,
    totp: bool,
    passkey: bool,
    admin: bool,
}

async fn insert_identity(conn: &impl ConnectionTrait, i: Identity) -> Result<(), StoreError> {
    execute(
        conn,
        "INSERT INTO svc.user_identities (id, user_id, provider, subject, email, created_at, last_used_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        [
            i.id.into(),
            i.user_id.into(),
            i.provider.into(),
            i.subject.into(),
            i.email.into(),
            i.created_at.into(),
            i.last_used_at.into(),
        ],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl OAuthStore for PgStore {
    async fn save_flow(&self, flow: PendingFlow, now: DateTime<Utc>) -> Result<(), StoreError> {
        let sql = "WITH purged AS (DELETE FROM svc.oauth_states WHERE expires_at <= $7) \
                   INSERT INTO svc.oauth_states (state_hash, provider, redirect_to, pkce_verifier, nonce, expires_at) \
                   VALUES ($1, $2, $3, $4, $5, $6)";
        let values: [Value; 7] = [
            flow.state_hash.to_vec().into(),
            flow.provider.into(),
            flow.redirect_to.into(),
            flow.pkce_verifier.into(),
            flow.nonce.into(),
            flow.expires_at.into(),
            now.into(),
        ];
        execute(&self.db, sql, values).await?;
        Ok(())
    }

    async fn take_flow(&self, state_hash: &[u8; 32]) -> Result<Option<PendingFlow>, StoreError> {
        let sql = "DELETE FROM svc.oauth_states WHERE state_hash = $1 \
                   RETURNING provider, redirect_to, pkce_verifier, nonce, expires_at";
        let Some(row) = self
            .db
            .fetch_optional(stmt(sql, [state_hash.to_vec().into()]))
            .await?
        else {
            return Ok(None);
        };
        let flow = rows::row::<FlowRow>(&row)?;
        Ok(Some(PendingFlow {
            state_hash: *state_hash,
            provider: flow.provider,
            redirect_to: flow.redirect_to,
            pkce_verifier: flow.pkce_verifier,
            nonce: flow.nonce,
            expires_at: flow.expires_at,
        }))
    }

    async fn account_for(
        &self,
        provider: &str,
        subject: &str,
        email: Option<&str>,
    ) -> Result<Option<AccountMatch>, StoreError> {
        let sql = "SELECT u.id, i.id AS identity_id, u.active, \
                   coalesce(bool_or(r.api_access), false) AS api_access, \
                   coalesce(bool_or(r.admin_access), false) AS admin, \
                   EXISTS (SELECT 1 FROM svc.user_totp t WHERE t.user_id = u.id AND t.secret IS NOT NULL) AS totp, \
                   EXISTS (SELECT 1 FROM svc.passkeys p WHERE p.user_id = u.id) AS passkey \
                   FROM svc.users u \
                   LEFT JOIN svc.user_identities i ON i.user_id = u.id AND i.provider = $1 AND i.subject = $2 \
                   LEFT JOIN svc.role_members m ON m.user_id = u.id LEFT JOIN svc.roles r ON r.id = m.role_id \
                   WHERE u.id IN (SELECT user_id FROM svc.user_identities WHERE provider = $1 AND subject = $2) \
                      OR lower(u.email) = lower($3) \
                   GROUP BY u.id, i.id ORDER BY i.id IS NULL LIMIT 1";
        let row = self
            .db
            .fetch_optional(stmt(
                sql,
                [
                    provider.into(),
                    subject.into(),
                    email.map(str::to_owned).into(),
                ],
            ))
            .await?;
        row.map(|row| {
            let account = rows::row::<AccountRow>(&row)?;
            Ok(AccountMatch {
                user_id: account.id,
                identity_id: account.identity_id,
                active: account.active,
                api_access: account.api_access,
                totp: account.totp,
                passkey: account.passkey,
                admin: account.admin,
            })
        })
        .transpose()
    }

    async fn role_api_access(&self, role_id: Uuid) -> Result<bool, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT api_access FROM svc.roles WHERE id = $1",
                [role_id.into()],
            ))
            .await?;
        Ok(match row {
            Some(row) => rows::column(&row, "api_access")?,
            None => false,
        })
    }

    async fn sign_in(
        &self,
        plan: SignInPlan,
        session: Option<NewSession>,
        events: Vec<AuditEvent>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let txn = self.db.open_txn().await?;
        match plan {
            SignInPlan::Returning { identity_id, email } => {
                execute(
                    &txn,
                    "UPDATE svc.user_identities SET email = $2, last_used_at = $3 WHERE id = $1",
                    [identity_id.into(), email.into(), now.into()],
                )
                .await?;
            }
            SignInPlan::Link(identity) => {
                // An address never verified may have been registered by
                // someone else before its owner came: their password,
                // sessions and tokens end here (API.md 16).
                claim_unverified(&txn, identity.user_id, &identity.provider, now).await?;
                insert_identity(&txn, identity).await?;
            }
            SignInPlan::Register(user, identity) => {
                insert_user(&txn, &user, now).await?;
                insert_identity(&txn, identity).await?;
            }
        }
        if let Some(session) = session {
            insert_session(&txn, session).await?;
        }
        for event in events {
            write_audit(&txn, event, now).await?;
        }
        txn.commit_txn().await
    }

    async fn identities(&self, user_id: Uuid) -> Result<Option<Vec<Identity>>, StoreError> {
        let sql = format!(
            "SELECT u.id AS owner, {IDENTITY_COLUMNS} FROM svc.users u \
             LEFT JOIN svc.user_identities i ON i.user_id = u.id \
             WHERE u.id = $1 ORDER BY i.created_at, i.id"
        );
        let rows = self.db.fetch_all(stmt(&sql, [user_id.into()])).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let identities = rows
            .iter()
            .map(rows::row::<Option<IdentityRow>>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(
            identities.into_iter().flatten().map(Into::into).collect(),
        ))
    }

    async fn delete_identity(
        &self,
        user_id: Uuid,
        identity_id: Uuid,
        event: AuditEvent,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        let deleted = execute(
            &txn,
            "DELETE FROM svc.user_identities WHERE id = $1 AND user_id = $2",
            [identity_id.into(), user_id.into()],
        )
        .await?;
        if deleted == 0 {
            return Ok(false);
        }
        commit_with_audit(txn, event, self.now()).await?;
        Ok(true)
    }
}
