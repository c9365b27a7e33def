//! The email outbox port (`svc.email_outbox`): emails are written in the
//! transaction of the change that causes them; a delivery worker claims
//! them through [`Outbox`] (several instances share one database without
//! sending an email twice at once) and reports each attempt. The store
//! adapter implements it; the mail adapter drives it.

use std::time::Duration;

use async_trait::async_trait;
use kernel::StoreError;
use uuid::Uuid;

/// An email claimed from the outbox.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The outbox row.
    pub id: Uuid,
    /// The recipient.
    pub to: String,
    /// The subject.
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// The HTML body.
    pub html: String,
    /// The link the email carries, for the log.
    pub link: Option<String>,
    /// Attempts so far, this one included.
    pub attempts: u32,
}

/// Where emails wait: claimed without blocking other instances, with every
/// attempt counted.
#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// Claims up to `batch` emails never logged, and marks them logged.
    async fn claim_for_log(&self, batch: u32) -> Result<Vec<Claimed>, StoreError>;
    /// Claims up to `batch` due emails with fewer than `max_attempts`
    /// attempts: counts an attempt and holds each for `lease`.
    async fn claim_for_sending(
        &self,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<Claimed>, StoreError>;
    /// The email went out.
    async fn mark_sent(&self, id: Uuid) -> Result<(), StoreError>;
    /// Hands claimed emails that were never tried back at once, their
    /// attempt uncounted (a stopping worker's).
    async fn release(&self, ids: &[Uuid]) -> Result<(), StoreError>;
    /// The email did not go out: keeps `error`, tries again after `retry_in`.
    async fn mark_failed(
        &self,
        id: Uuid,
        error: &str,
        retry_in: Duration,
    ) -> Result<(), StoreError>;
}
