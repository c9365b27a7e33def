//! The email outbox: claims with `FOR UPDATE SKIP LOCKED`, so several
//! instances share one database without sending an email twice.

use std::time::Duration;

use async_trait::async_trait;
use kernel::StoreError;
use outbox::{Claimed, Outbox};
use sea_orm::{FromQueryResult, QueryResult, Value};
use uuid::Uuid;

use crate::query::Query;
use crate::{PgStore, execute_when_stopping, rows, stmt};

/// Claims due rows for sending: counts an attempt and leases each for `$2`
/// seconds (its next attempt), so a crashed sender's rows come back by themselves.
const CLAIM_FOR_SENDING: &str = "UPDATE svc.email_outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2) \
     WHERE id IN (SELECT id FROM svc.email_outbox WHERE sent_at IS NULL AND attempts < $3 AND next_attempt_at <= now() \
                  ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, to_address, subject, body_text, body_html, link, attempts";

/// Claims rows that were never logged (no SMTP configured).
const CLAIM_FOR_LOG: &str = "UPDATE svc.email_outbox SET logged_at = now() \
     WHERE id IN (SELECT id FROM svc.email_outbox WHERE sent_at IS NULL AND logged_at IS NULL \
                  ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, to_address, subject, body_text, body_html, link, attempts";

/// An email as claiming it answers.
#[derive(FromQueryResult)]
struct ClaimedRow {
    id: Uuid,
    to_address: String,
    subject: String,
    body_text: String,
    body_html: String,
    link: Option<String>,
    attempts: i32,
}

fn claimed(row: &QueryResult) -> Result<Claimed, StoreError> {
    let r = rows::row::<ClaimedRow>(row)?;
    Ok(Claimed {
        id: r.id,
        to: r.to_address,
        subject: r.subject,
        text: r.body_text,
        html: r.body_html,
        link: r.link,
        attempts: u32::try_from(r.attempts).unwrap_or(0),
    })
}

impl PgStore {
    async fn claim_emails(
        &self,
        sql: &str,
        values: impl IntoIterator<Item = Value>,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.db
            .fetch_all(stmt(sql, values))
            .await?
            .iter()
            .map(claimed)
            .collect()
    }
}

#[async_trait]
impl Outbox for PgStore {
    async fn claim_for_log(&self, batch: u32) -> Result<Vec<Claimed>, StoreError> {
        self.claim_emails(CLAIM_FOR_LOG, [i64::from(batch).into()])
            .await
    }

    async fn claim_for_sending(
        &self,
        batch: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> Result<Vec<Claimed>, StoreError> {
        let values = [
            i64::from(batch).into(),
            lease.as_secs_f64().into(),
            i64::from(max_attempts).into(),
        ];
        self.claim_emails(CLAIM_FOR_SENDING, values).await
    }

    async fn mark_sent(&self, id: Uuid) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "UPDATE svc.email_outbox SET sent_at = now(), last_error = NULL WHERE id = $1",
                [id.into()],
            ))
            .await?;
        Ok(())
    }

    async fn release(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        let sql = "UPDATE svc.email_outbox SET attempts = attempts - 1, next_attempt_at = now() \
                   WHERE id = ANY($1) AND sent_at IS NULL";
        execute_when_stopping(&self.db, sql, vec![ids.to_vec().into()])
            .await
            .map(drop)
    }

    async fn mark_failed(
        &self,
        id: Uuid,
        error: &str,
        retry_in: Duration,
    ) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "UPDATE svc.email_outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3) WHERE id = $1",
                [id.into(), error.into(), retry_in.as_secs_f64().into()],
            )).await?;
        Ok(())
    }
}
