//! Email delivery from the outbox `svc.email_outbox`.
//!
//! Emails are written to the outbox in the transaction of the change that
//! causes them. This worker claims due rows with `FOR UPDATE SKIP LOCKED`
//! (so several instances can share one database), sends them over SMTP and
//! marks them sent; a failure is retried later with exponential backoff, so
//! nothing is lost while the mail server is down. Without an SMTP URL the
//! worker logs each email and its link once instead.

use std::time::Duration;

use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement, Value,
};
use uuid::Uuid;

/// Rows claimed per round.
const BATCH: i64 = 20;
/// Attempts after which an email is left alone (with its last error).
const MAX_ATTEMPTS: i32 = 20;
/// Longest wait between two attempts.
const MAX_BACKOFF_SECS: i64 = 600;

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
    db: DatabaseConnection,
    delivery: Delivery,
    from: Mailbox,
    poll: Duration,
}

struct Claimed {
    id: Uuid,
    to: String,
    subject: String,
    text: String,
    html: String,
    link: Option<String>,
    attempts: i32,
}

fn claimed(row: &QueryResult) -> Result<Claimed, DbErr> {
    Ok(Claimed {
        id: row.try_get("", "id")?,
        to: row.try_get("", "to_address")?,
        subject: row.try_get("", "subject")?,
        text: row.try_get("", "body_text")?,
        html: row.try_get("", "body_html")?,
        link: row.try_get("", "link")?,
        attempts: row.try_get("", "attempts")?,
    })
}

fn stmt(sql: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// Claims due rows for sending: each gets a lease of `lease` seconds (its
/// next attempt), so a crashed sender's rows come back by themselves.
const CLAIM_FOR_SMTP: &str = "UPDATE svc.email_outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2) \
     WHERE id IN (SELECT id FROM svc.email_outbox WHERE sent_at IS NULL AND attempts < $3 AND next_attempt_at <= now() \
                  ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, to_address, subject, body_text, body_html, link, attempts";

/// Claims rows that were never logged (no SMTP configured).
const CLAIM_FOR_LOG: &str = "UPDATE svc.email_outbox SET logged_at = now() \
     WHERE id IN (SELECT id FROM svc.email_outbox WHERE sent_at IS NULL AND logged_at IS NULL \
                  ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, to_address, subject, body_text, body_html, link, attempts";

impl MailWorker {
    /// A worker over `db`, sending through `smtp_url` (`smtp://host:port`,
    /// `smtp://user:pass@host:587?tls=required`, `smtps://host`) or, without
    /// one, logging. `poll` is the pause between rounds.
    pub fn new(
        db: DatabaseConnection,
        smtp_url: Option<&str>,
        from: &str,
        poll: Duration,
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
            db,
            delivery,
            from,
            poll,
        })
    }

    /// Runs rounds forever; spawn it.
    pub async fn run(self) {
        loop {
            match self.deliver_due().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "email outbox round failed"),
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// One round: claims due emails and delivers them; answers how many it handled.
    pub async fn deliver_due(&self) -> Result<usize, DbErr> {
        match &self.delivery {
            Delivery::Log => {
                let rows = self
                    .db
                    .query_all_raw(stmt(CLAIM_FOR_LOG, [BATCH.into()]))
                    .await?;
                for row in &rows {
                    let email = claimed(row)?;
                    tracing::info!(to = %email.to, subject = %email.subject, link = ?email.link,
                        "no TESSERA_SMTP_URL: email kept in the outbox and logged");
                }
                Ok(rows.len())
            }
            Delivery::Smtp(transport) => {
                let lease = 60.0_f64;
                let rows = self
                    .db
                    .query_all_raw(stmt(
                        CLAIM_FOR_SMTP,
                        [BATCH.into(), lease.into(), MAX_ATTEMPTS.into()],
                    ))
                    .await?;
                for row in &rows {
                    let email = claimed(row)?;
                    self.send(transport, email).await?;
                }
                Ok(rows.len())
            }
        }
    }

    async fn send(
        &self,
        transport: &AsyncSmtpTransport<Tokio1Executor>,
        email: Claimed,
    ) -> Result<(), DbErr> {
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
                self.db
                    .execute_raw(stmt("UPDATE svc.email_outbox SET sent_at = now(), last_error = NULL WHERE id = $1", [email.id.into()]))
                    .await?;
                tracing::info!(to = %email.to, subject = %email.subject, "email sent");
            }
            Err(error) => {
                let backoff = 2_i64
                    .saturating_pow(u32::try_from(email.attempts).unwrap_or(0))
                    .min(MAX_BACKOFF_SECS);
                tracing::warn!(to = %email.to, attempts = email.attempts, retry_in_secs = backoff, %error, "email not sent; will retry");
                #[allow(clippy::cast_precision_loss, reason = "backoff is at most 600")]
                let backoff = backoff as f64;
                self.db
                    .execute_raw(stmt(
                        "UPDATE svc.email_outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3) WHERE id = $1",
                        [email.id.into(), error.chars().take(1000).collect::<String>().into(), backoff.into()],
                    ))
                    .await?;
            }
        }
        Ok(())
    }
}
