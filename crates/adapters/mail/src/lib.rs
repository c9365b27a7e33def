//! Email delivery from the outbox (`svc.email_outbox`, through the
//! [`Outbox`] port of the `outbox` crate).
//!
//! Emails are written to the outbox in the transaction of the change that
//! causes them. This worker claims due emails (the store claims them so that
//! several instances can share one database), sends them over SMTP and
//! marks them sent; a failure is retried later with exponential backoff, so
//! nothing is lost while the mail server is down. Without an SMTP URL the
//! worker logs each email and its link once instead.

use std::sync::Arc;
use std::time::Duration;

use kernel::StoreError;
use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use outbox::{Claimed, Outbox};
use uuid::Uuid;

/// Emails claimed per round.
const BATCH: u32 = 20;
/// Attempts after which an email is left alone (with its last error).
const MAX_ATTEMPTS: u32 = 20;
/// Longest wait between two attempts.
const MAX_BACKOFF_SECS: u64 = 600;
/// Longest error kept with an email.
const ERROR_MAX_CHARS: usize = 1000;

/// A configuration problem of the worker.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The SMTP URL cannot be used.
    #[error("TESSERA_SMTP_URL: {0}")]
    SmtpUrl(String),
    /// The sender address is not an address.
    #[error("TESSERA_SMTP_FROM: {0}")]
    From(String),
}

/// How emails leave the outbox.
enum Delivery {
    /// Over SMTP.
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    /// Into the log (no SMTP configured).
    Log,
}

/// The delivery worker.
pub struct MailWorker {
    outbox: Arc<dyn Outbox>,
    delivery: Delivery,
    from: Mailbox,
    poll: Duration,
    lease: Duration,
}

impl MailWorker {
    /// A worker over `outbox`, sending through `smtp_url` (`smtp://host:port`,
    /// `smtp://user:pass@host:587?tls=required`, `smtps://host`) or, without
    /// one, logging. `poll` is the pause between rounds; `lease` how long a
    /// claimed email is held by its sender (a crashed sender's emails come
    /// back by themselves after it).
    pub fn new(
        outbox: Arc<dyn Outbox>,
        smtp_url: Option<&str>,
        from: &str,
        poll: Duration,
        lease: Duration,
    ) -> Result<Self, MailError> {
        let delivery = match smtp_url {
            Some(url) => Delivery::Smtp(
                AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                    .map_err(|e| MailError::SmtpUrl(e.to_string()))?
                    .timeout(Some(Duration::from_secs(15)))
                    .build(),
            ),
            None => Delivery::Log,
        };
        let from = from
            .parse()
            .map_err(|e: lettre::address::AddressError| MailError::From(e.to_string()))?;
        Ok(Self {
            outbox,
            delivery,
            from,
            poll,
            lease,
        })
    }

    /// Runs rounds until `stop` turns true or its sender is gone; spawn it.
    /// Stopped, it finishes the email it is sending and hands the rest of
    /// its claim back.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        while !*stop.borrow() {
            match self.deliver_due(&stop).await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "email outbox round failed"),
            }
            tokio::select! {
                () = tokio::time::sleep(self.poll) => {}
                changed = stop.changed() => if changed.is_err() { return },
            }
        }
    }

    /// One round: claims due emails and delivers them until `stop` turns
    /// true; answers how many it claimed.
    pub async fn deliver_due(
        &self,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<usize, StoreError> {
        match &self.delivery {
            Delivery::Log => {
                let emails = self.outbox.claim_for_log(BATCH).await?;
                for email in &emails {
                    tracing::info!(to = %email.to, subject = %email.subject, link = ?email.link,
                        "no TESSERA_SMTP_URL: email kept in the outbox and logged");
                }
                Ok(emails.len())
            }
            Delivery::Smtp(transport) => {
                let emails = self
                    .outbox
                    .claim_for_sending(BATCH, self.lease, MAX_ATTEMPTS)
                    .await?;
                let count = emails.len();
                let mut emails = emails.into_iter();
                while !*stop.borrow() {
                    let Some(email) = emails.next() else {
                        return Ok(count);
                    };
                    self.send(transport, email).await?;
                }
                let untried: Vec<Uuid> = emails.map(|email| email.id).collect();
                if !untried.is_empty() {
                    self.outbox.release(&untried).await?;
                    tracing::info!(
                        released = untried.len(),
                        "stopping: claimed emails handed back"
                    );
                }
                Ok(count)
            }
        }
    }

    async fn send(
        &self,
        transport: &AsyncSmtpTransport<Tokio1Executor>,
        email: Claimed,
    ) -> Result<(), StoreError> {
        let outcome = match email.to.parse::<Mailbox>() {
            Err(e) => Err(format!("bad recipient: {e}")),
            Ok(to) => match Message::builder()
                .from(self.from.clone())
                .to(to)
                .subject(email.subject.clone())
                .multipart(MultiPart::alternative_plain_html(
                    email.text.clone(),
                    email.html.clone(),
                )) {
                Err(e) => Err(e.to_string()),
                Ok(message) => transport
                    .send(message)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            },
        };
        match outcome {
            Ok(()) => {
                self.outbox.mark_sent(email.id).await?;
                tracing::info!(to = %email.to, subject = %email.subject, "email sent");
            }
            Err(error) => {
                let backoff = 2_u64.saturating_pow(email.attempts).min(MAX_BACKOFF_SECS);
                tracing::warn!(to = %email.to, attempts = email.attempts, retry_in_secs = backoff, %error, "email not sent; will retry");
                let error: String = error.chars().take(ERROR_MAX_CHARS).collect();
                self.outbox
                    .mark_failed(email.id, &error, Duration::from_secs(backoff))
                    .await?;
            }
        }
        Ok(())
    }
}
