//! What the workflow worker claims and sweeps: schedule ticks, orphaned
//! runs and row events (with `FOR UPDATE SKIP LOCKED`), ended rate
//! windows, old runs, the leases of a stopping instance.

use std::time::Duration;

use async_trait::async_trait;
use kernel::StoreError;
use uuid::Uuid;
use workflows::store::{ClaimedRun, ScheduleRecord, TickClaim, WorkerStore};

use super::rows::{ScheduleRow, claimed};
use super::{CLAIMED_COLUMNS, seconds};
use crate::query::Query;
use crate::rows as typed;
use crate::{PgStore, execute, execute_when_stopping, stmt};

#[async_trait]
impl WorkerStore for PgStore {
    async fn set_schedule(
        &self,
        id: Uuid,
        next_at: Option<chrono::DateTime<chrono::Utc>>,
        expected: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE svc.workflows SET schedule_next_at = $2 WHERE id = $1 \
                   AND ($3::timestamptz IS NULL OR schedule_next_at = $3)";
        execute(&self.db, sql, [id.into(), next_at.into(), expected.into()]).await?;
        Ok(())
    }

    async fn schedule_pass(&self) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "UPDATE svc.schedule_passes p SET at = now() FROM \
                 (SELECT at FROM svc.schedule_passes FOR UPDATE) AS before RETURNING before.at",
                [],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("svc.schedule_passes has no row".into()))?;
        typed::column(&row, "at")
    }

    async fn schedules(
        &self,
        within: Duration,
        limit: u64,
    ) -> Result<Vec<ScheduleRecord>, StoreError> {
        let rows = self
            .db
            .fetch_all(stmt(
                "SELECT id, published, schedule_next_at FROM svc.workflows \
                 WHERE schedule_next_at <= now() + make_interval(secs => $1) AND enabled AND published IS NOT NULL \
                 ORDER BY schedule_next_at LIMIT $2",
                [seconds(within), i64::try_from(limit).unwrap_or(i64::MAX).into()],
            )).await?;
        rows.iter()
            .map(|row| {
                let r = typed::row::<ScheduleRow>(row)?;
                Ok(ScheduleRecord {
                    id: r.id,
                    definition: r.published,
                    next_at: r.schedule_next_at,
                })
            })
            .collect()
    }

    async fn claim_ticks(
        &self,
        claim: TickClaim,
        owner: Uuid,
        lease: Duration,
    ) -> Result<Vec<ClaimedRun>, StoreError> {
        // Moving the next tick on claims the ticks: an instance that read the
        // same tick finds it moved and starts nothing. A user no longer
        // active starts no run; the tick still moves on.
        let sql = format!(
            "WITH claimed AS ( \
               UPDATE svc.workflows SET schedule_next_at = $3 \
               WHERE id = $1 AND schedule_next_at = $2 AND enabled AND published IS NOT NULL \
               RETURNING id, published), \
             started AS ( \
               INSERT INTO svc.workflow_runs (id, workflow_id, status, definition, input, run_as, \
                 lease_owner, lease_start, lease_until, scheduled_at) \
               SELECT svc.uuid_v7(), c.id, 'RUNNING', c.published, \
                 jsonb_build_object('scheduledAt', to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')), \
                 u.id, $5, now(), now() + make_interval(secs => $6), t.at \
               FROM claimed c CROSS JOIN unnest($4::timestamptz[]) AS t(at) \
               JOIN svc.users u ON u.id = $7 AND u.active \
               ORDER BY t.at \
               ON CONFLICT (workflow_id, scheduled_at) WHERE scheduled_at IS NOT NULL DO NOTHING \
               RETURNING {CLAIMED_COLUMNS}) \
             SELECT * FROM started"
        );
        let rows = self
            .db
            .fetch_all(stmt(
                &sql,
                [
                    claim.workflow_id.into(),
                    claim.expected.into(),
                    claim.next_at.into(),
                    claim.ticks.into(),
                    owner.into(),
                    seconds(lease),
                    claim.run_as.into(),
                ],
            ))
            .await?;
        rows.iter().map(claimed).collect()
    }

    async fn claim_orphans(
        &self,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError> {
        let sql = format!(
            "UPDATE svc.workflow_runs SET lease_owner = $1, lease_start = now(), \
             lease_until = now() + make_interval(secs => $2), attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM svc.workflow_runs WHERE status = 'RUNNING' AND lease_until < now() \
                          ORDER BY lease_until LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING {CLAIMED_COLUMNS}"
        );
        self.claim(&sql, owner, lease, limit).await
    }

    async fn claim_events(
        &self,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError> {
        let sql = format!(
            "WITH events AS ( \
               DELETE FROM svc.row_events WHERE id IN ( \
                 SELECT id FROM svc.row_events ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) \
               RETURNING id, resource_id, event, old, new), \
             started AS ( \
               INSERT INTO svc.workflow_runs (id, workflow_id, status, definition, input, run_as, \
                 lease_owner, lease_start, lease_until) \
               SELECT svc.uuid_v7(), w.id, 'RUNNING', w.published, \
                 jsonb_build_object('event', e.event, 'resource', r.schema_name || '.' || r.table_name, \
                                    'old', e.old, 'new', e.new), \
                 who.id, $1, now(), now() + make_interval(secs => $2) \
               FROM events e JOIN svc.workflows w ON w.event_resource_id = e.resource_id \
                 AND w.enabled AND w.published IS NOT NULL AND e.event = ANY (w.event_kinds) \
               JOIN svc.resources r ON r.id = e.resource_id \
               LEFT JOIN svc.users u ON u.id = (w.published -> 'trigger' ->> 'executeAs')::uuid AND u.active \
               CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(w.published -> 'trigger' -> 'executeAs') = 'string' THEN u.id \
                   ELSE (SELECT m.user_id FROM svc.role_members m \
                   JOIN svc.users a ON a.id = m.user_id WHERE m.role_id = '{admins}' AND a.active \
                   ORDER BY a.created_at LIMIT 1) END AS id) who \
               WHERE who.id IS NOT NULL ORDER BY e.id \
               RETURNING {CLAIMED_COLUMNS}) \
             SELECT * FROM started",
            admins = kernel::ADMINISTRATORS_ROLE_ID
        );
        self.claim(&sql, owner, lease, limit).await
    }

    async fn clear_ended_limits(&self) -> Result<u64, StoreError> {
        let sql = "DELETE FROM svc.rate_limits WHERE key IN (SELECT key FROM svc.rate_limits \
                   WHERE last_at < now() - interval '61 seconds' ORDER BY last_at LIMIT 10000 FOR UPDATE SKIP LOCKED)";
        execute(&self.db, sql, []).await
    }

    async fn release_leases(&self, owner: Uuid) -> Result<u64, StoreError> {
        // No owner: a late checkpoint of the stopping instance cannot renew it.
        let sql = "UPDATE svc.workflow_runs SET lease_owner = NULL, lease_until = now() \
                   WHERE lease_owner = $1 AND status = 'RUNNING'";
        execute_when_stopping(&self.db, sql, vec![owner.into()]).await
    }

    async fn purge_runs(&self, days: i64) -> Result<u64, StoreError> {
        let sql = "DELETE FROM svc.workflow_runs WHERE finished_at < now() - make_interval(days => $1::int)";
        execute(&self.db, sql, [days.into()]).await
    }
}
