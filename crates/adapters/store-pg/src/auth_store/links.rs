//! One-time links sent by email (reset, verification, invitation), each
//! issued with its email in one transaction and redeemed once.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{Invitation, LinkStore, TokenMail};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use uuid::Uuid;

use crate::query::Begin;
use crate::{PgStore, commit_with_audit};

#[async_trait]
impl LinkStore for PgStore {
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
}
