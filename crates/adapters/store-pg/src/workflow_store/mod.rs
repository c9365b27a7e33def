//! Workflows and their runs in PostgreSQL: definitions, leased runs claimed
//! with `FOR UPDATE SKIP LOCKED`, row events consumed exactly once.

use std::time::Duration;

use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use sea_orm::{ConnectionTrait, TransactionTrait, Value};
use serde_json::Value as Json;
use uuid::Uuid;
use workflows::run::{Outcome, RunRecord, StepRecord};
use workflows::store::{
    ClaimedRun, EventTarget, NewRun, NewWorkflow, PublishedWorkflow, ResultAsker, RunUserRecord,
    ScheduleRecord, StoredStart, TickClaim, WebhookLookup, WebhookTarget, WorkflowChanges,
    WorkflowRecord,
};
use workflows::{RunJournal, WorkflowStore};

mod rows;

use self::rows::{
    RunRow, RunUserRow, ScheduleRow, WebhookRow, claimed, error_of, outcome, status, steps_of,
    workflow,
};
use crate::rows as typed;
use crate::{
    PgStore, commit_with_audit, execute, execute_when_stopping, exists, map_err, stmt, versions_of,
};

const WORKFLOW_COLUMNS: &str =
    "id, slug, name, enabled, draft, published, published_at, created_at, updated_at";

/// The workflow of a webhook call (`$1` slug) with the versions, taking a
/// call of `$3` (the address's key) from the public rate limit when the
/// workflow's access is public (`$4`; `$5` when it names none) and it is
/// called with its method (`$2`; `$6` when it names none): under the row
/// lock of `ON CONFLICT`, against the limit stored in `svc.settings` under
/// `$7` (`$8` when not stored), so no two instances pass it together.
/// Windows that ended are cleared by the worker. The defaults come from the
/// workflow model and the settings registry.
const WEBHOOK_SQL: &str = "WITH w AS ( \
        SELECT w.id, w.published, w.published_at, \
        ARRAY(SELECT g.role_id FROM svc.grants g WHERE g.workflow_id = w.id AND g.action = 'invoke') AS roles, \
        coalesce(w.published #>> '{trigger,access}', $5) = $4 \
          AND coalesce(w.published #>> '{trigger,method}', $6) = $2 AS counted \
        FROM svc.workflows w WHERE w.slug = $1 AND w.enabled AND w.published IS NOT NULL), \
    lim AS (SELECT coalesce((SELECT (s.value #>> '{}')::bigint FROM svc.settings s \
        WHERE s.key = $7), $8) AS n), \
    taken AS (SELECT svc.take_rate($3, (SELECT n FROM lim)) AS wait FROM w WHERE w.counted) \
    SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, \
        w.id, w.published, w.published_at, w.roles, coalesce(w.counted, false) AS counted, \
        coalesce((SELECT wait FROM taken), 0) AS wait \
    FROM svc.cache_version v LEFT JOIN w ON true";

/// Columns a claimed run is resumed from (a run a trigger started has
/// no stored chain: its own workflow).
const CLAIMED_COLUMNS: &str =
    "id, definition, input, run_as, steps, attempts, coalesce(chain, ARRAY[workflow_id]) AS chain";

fn json_of<T: serde::Serialize>(value: &T) -> Result<Json, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Internal(e.to_string()))
}

fn seconds(lease: Duration) -> Value {
    lease.as_secs_f64().into()
}

fn uuids(ids: &[Uuid]) -> Value {
    ids.to_vec().into()
}

impl PgStore {
    /// Runs a claiming statement (`$1` owner, `$2` lease seconds, `$3` limit)
    /// that answers [`CLAIMED_COLUMNS`].
    async fn claim(
        &self,
        sql: &str,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError> {
        let values = [
            owner.into(),
            seconds(lease),
            i64::try_from(limit).unwrap_or(1).into(),
        ];
        let rows = self
            .db
            .query_all_raw(stmt(sql, values))
            .await
            .map_err(map_err)?;
        rows.iter().map(claimed).collect()
    }

    /// Captures row changes of a resource's table (idempotent; plain SQL
    /// writes are captured too).
    pub(crate) async fn capture_events(
        conn: &impl ConnectionTrait,
        resource: Uuid,
    ) -> Result<(), StoreError> {
        let row = conn
            .query_one_raw(stmt(
                "SELECT format('CREATE OR REPLACE TRIGGER tessera_row_events AFTER INSERT OR UPDATE OR DELETE ON %I.%I \
                 FOR EACH ROW EXECUTE FUNCTION svc.capture_row_event()', schema_name, table_name) AS ddl \
                 FROM svc.resources WHERE id = $1",
                [resource.into()],
            ))
            .await
            .map_err(map_err)?
            .ok_or_else(|| kernel::FieldError::new("trigger.resourceId", "no such resource"))?;
        let ddl: String = typed::column(&row, "ddl")?;
        conn.execute_unprepared(&ddl).await.map_err(map_err)?;
        Ok(())
    }
}

#[async_trait]
impl RunJournal for PgStore {
    fn child(self: std::sync::Arc<Self>, _: &[StepRecord]) -> std::sync::Arc<dyn RunJournal> {
        self
    }

    async fn checkpoint(
        &self,
        run: Uuid,
        owner: Uuid,
        steps: &[StepRecord],
    ) -> Result<Option<bool>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "UPDATE svc.workflow_runs SET steps = steps || $3, lease_until = now() + (lease_until - lease_start), \
                 lease_start = now() WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING' RETURNING cancel_requested",
                [run.into(), owner.into(), json_of(&steps)?.into()],
            ))
            .await
            .map_err(map_err)?;
        row.map(|r| typed::column(&r, "cancel_requested"))
            .transpose()
    }

    async fn renew(&self, run: Uuid, owner: Uuid) -> Result<Option<bool>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "UPDATE svc.workflow_runs SET lease_until = now() + (lease_until - lease_start), lease_start = now() \
                 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING' RETURNING cancel_requested",
                [run.into(), owner.into()],
            ))
            .await
            .map_err(map_err)?;
        row.map(|r| typed::column(&r, "cancel_requested"))
            .transpose()
    }

    async fn finish(
        &self,
        owner: Uuid,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), StoreError> {
        execute(
            &self.db,
            "UPDATE svc.workflow_runs SET status = $3, result = $4, error = $5, steps = $6, \
                 finished_at = now(), lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'",
            [
                outcome.id.into(),
                owner.into(),
                outcome.status.as_str().into(),
                outcome.result.clone().into(),
                outcome.error.as_ref().map(json_of).transpose()?.into(),
                json_of(&steps)?.into(),
            ],
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl WorkflowStore for PgStore {
    async fn workflows(&self) -> Result<Vec<WorkflowRecord>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM svc.workflows ORDER BY name, id");
        let rows = self
            .db
            .query_all_raw(stmt(&sql, []))
            .await
            .map_err(map_err)?;
        rows.iter().map(workflow).collect()
    }

    async fn workflow(&self, id: Uuid) -> Result<Option<WorkflowRecord>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM svc.workflows WHERE id = $1");
        let row = self
            .db
            .query_one_raw(stmt(&sql, [id.into()]))
            .await
            .map_err(map_err)?;
        row.as_ref().map(workflow).transpose()
    }

    async fn create_workflow(
        &self,
        new: NewWorkflow,
        event: AuditEvent,
    ) -> Result<WorkflowRecord, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let sql = format!(
            "INSERT INTO svc.workflows (id, slug, name, enabled, draft) VALUES ($1, $2, $3, $4, $5) RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .query_one_raw(stmt(
                &sql,
                [
                    new.id.into(),
                    new.slug.into(),
                    new.name.into(),
                    new.enabled.into(),
                    new.draft.into(),
                ],
            ))
            .await
            .map_err(map_err)?
            .ok_or(StoreError::NotFound)?;
        let created = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(created)
    }

    async fn update_workflow(
        &self,
        id: Uuid,
        changes: WorkflowChanges,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        let sql = format!(
            "UPDATE svc.workflows SET slug = coalesce($2, slug), name = coalesce($3, name), \
             enabled = coalesce($4, enabled), draft = coalesce($5, draft), updated_at = now() \
             WHERE id = $1 RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .query_one_raw(stmt(
                &sql,
                [
                    id.into(),
                    changes.slug.into(),
                    changes.name.into(),
                    changes.enabled.into(),
                    changes.draft.into(),
                ],
            ))
            .await
            .map_err(map_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let updated = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(Some(updated))
    }

    async fn delete_workflow(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        if execute(&txn, "DELETE FROM svc.workflows WHERE id = $1", [id.into()]).await? == 0 {
            return Ok(false);
        }
        self.commit_catalog_change(txn, event).await?;
        Ok(true)
    }

    async fn publish(
        &self,
        id: Uuid,
        snapshot: Json,
        target: Option<EventTarget>,
        schedule_next_at: Option<chrono::DateTime<chrono::Utc>>,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        if let Some(target) = &target {
            Self::capture_events(&txn, target.resource_id).await?;
        }
        let (resource, events) = match target {
            Some(t) => (Some(t.resource_id), t.events),
            None => (None, Vec::new()),
        };
        let sql = format!(
            "UPDATE svc.workflows SET published = $2, published_at = now(), event_resource_id = $3, \
             event_kinds = $4, schedule_next_at = $5, updated_at = now() WHERE id = $1 RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .query_one_raw(stmt(
                &sql,
                [
                    id.into(),
                    snapshot.into(),
                    resource.into(),
                    events.into(),
                    schedule_next_at.into(),
                ],
            ))
            .await
            .map_err(map_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let published = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(Some(published))
    }

    async fn user_exists(&self, id: Uuid) -> Result<bool, StoreError> {
        let sql = "SELECT 1 AS one FROM svc.users WHERE id = $1 AND active";
        exists(&self.db, sql, [id.into()]).await
    }

    async fn resource_exists(&self, id: Uuid) -> Result<bool, StoreError> {
        let sql = "SELECT 1 AS one FROM svc.resources WHERE id = $1";
        exists(&self.db, sql, [id.into()]).await
    }

    async fn webhook(&self, call: WebhookLookup<'_>) -> Result<Option<WebhookTarget>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                WEBHOOK_SQL,
                [
                    call.slug.into(),
                    call.method.into(),
                    call.rate_key.into(),
                    call.public_access.into(),
                    call.default_access.into(),
                    call.default_method.into(),
                    call.rate_limit_key.into(),
                    call.rate_limit_default.into(),
                ],
            ))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        self.seen.observe(versions_of(&row, "v_")?);
        if typed::column::<Option<Uuid>>(&row, "id")?.is_none() {
            return Ok(None);
        }
        let found = typed::row::<WebhookRow>(&row)?;
        Ok(Some(WebhookTarget {
            workflow_id: found.id,
            definition: found.published,
            published_at: found.published_at,
            invoke_roles: found.roles,
            retry_after: (found.wait > 0).then(|| u64::try_from(found.wait).unwrap_or(1)),
        }))
    }

    async fn run_user(&self, id: Uuid) -> Result<Option<RunUserRecord>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, k.* \
                 FROM svc.cache_version v LEFT JOIN LATERAL ( \
                   SELECT u.id, u.active, u.email, u.name, u.timezone, \
                   coalesce(array_agg(r.id) FILTER (WHERE r.id IS NOT NULL), '{}') AS role_ids, \
                   coalesce(bool_or(r.api_access), false) AS api_access, \
                   coalesce(bool_or(r.admin_access), false) AS admin \
                   FROM svc.users u LEFT JOIN svc.role_members m ON m.user_id = u.id \
                   LEFT JOIN svc.roles r ON r.id = m.role_id WHERE u.id = $1 GROUP BY u.id) k ON true",
                [id.into()],
            ))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        let versions = versions_of(&row, "v_")?;
        self.seen.observe(versions);
        let Some(user) = typed::row::<Option<RunUserRow>>(&row)? else {
            return Ok(None);
        };
        Ok(Some(RunUserRecord {
            auth_version: versions.auth,
            active: user.active,
            role_ids: user.role_ids,
            api_access: user.api_access,
            admin: user.admin,
            profile: serde_json::json!({
                "id": user.id, "email": user.email, "name": user.name, "timezone": user.timezone,
            }),
            timezone: user.timezone,
        }))
    }

    async fn start_run(&self, run: NewRun) -> Result<(), StoreError> {
        execute(
            &self.db,
            "INSERT INTO svc.workflow_runs (id, workflow_id, status, test, definition, input, run_as, caller_id, \
                 lease_owner, lease_start, lease_until, parent_run_id, chain) \
                 VALUES ($1, $2, 'RUNNING', $3, $4, $5, $6, $7, $8, now(), now() + make_interval(secs => $9), $10, \
                 CASE WHEN $10::uuid IS NULL THEN NULL ELSE $11::uuid[] END)",
            [
                    run.id.into(),
                    run.workflow_id.into(),
                    run.test.into(),
                    run.definition.into(),
                    run.input.into(),
                    run.run_as.into(),
                    run.caller_id.into(),
                    run.owner.into(),
                    seconds(run.lease),
                    run.parent_run_id.into(),
                    uuids(&run.chain),
                ],
        )
        .await?;
        Ok(())
    }

    async fn record_run(
        &self,
        run: &NewRun,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), StoreError> {
        execute(
            &self.db,
            "INSERT INTO svc.workflow_runs (id, workflow_id, status, test, definition, input, run_as, caller_id, \
                 result, error, steps, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())",
            [
                    run.id.into(),
                    run.workflow_id.into(),
                    outcome.status.as_str().into(),
                    run.test.into(),
                    run.definition.clone().into(),
                    run.input.clone().into(),
                    run.run_as.into(),
                    run.caller_id.into(),
                    outcome.result.clone().into(),
                    outcome.error.as_ref().map(json_of).transpose()?.into(),
                    json_of(&steps)?.into(),
                ],
        )
        .await?;
        Ok(())
    }

    async fn request_cancel(&self, run: Uuid) -> Result<(), StoreError> {
        execute(
            &self.db,
            "UPDATE svc.workflow_runs SET cancel_requested = true WHERE id = $1 AND status = 'RUNNING'",
            [run.into()],
        )
        .await?;
        Ok(())
    }

    async fn run_result(
        &self,
        run: Uuid,
        asker: ResultAsker<'_>,
    ) -> Result<Option<Outcome>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT r.id, r.status, r.result, r.error FROM svc.workflow_runs r \
                 WHERE r.id = $1 AND r.caller_id = $2 \
                 AND (r.finished_at IS NULL OR r.finished_at > now() - interval '24 hours') \
                 AND ($4 OR EXISTS (SELECT 1 FROM svc.grants g WHERE g.workflow_id = r.workflow_id \
                      AND g.action = 'invoke' AND g.role_id = ANY ($3)))",
                [
                    run.into(),
                    asker.user_id.into(),
                    uuids(asker.role_ids),
                    asker.admin.into(),
                ],
            ))
            .await
            .map_err(map_err)?;
        row.as_ref().map(outcome).transpose()
    }

    async fn run_outcome(&self, run: Uuid) -> Result<Option<Outcome>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT id, status, result, error FROM svc.workflow_runs WHERE id = $1",
                [run.into()],
            ))
            .await
            .map_err(map_err)?;
        row.as_ref().map(outcome).transpose()
    }

    async fn runs(
        &self,
        workflow_id: Uuid,
        limit: u64,
        offset: u64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self
            .db
            .query_all_raw(stmt(
                "SELECT id, workflow_id, status, test, input, result, error, steps, started_at, finished_at, \
                 parent_run_id, scheduled_at FROM svc.workflow_runs WHERE workflow_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2 OFFSET $3",
                [
                    workflow_id.into(),
                    i64::try_from(limit).unwrap_or(i64::MAX).into(),
                    i64::try_from(offset).unwrap_or(i64::MAX).into(),
                ],
            ))
            .await
            .map_err(map_err)?;
        rows.iter()
            .map(|row| {
                let r = typed::row::<RunRow>(row)?;
                Ok(RunRecord {
                    id: r.id,
                    workflow_id: r.workflow_id,
                    status: status(&r.status)?,
                    test: r.test,
                    input: r.input,
                    result: r.result.unwrap_or(Json::Null),
                    error: error_of(r.error),
                    steps: steps_of(r.steps)?,
                    started_at: r.started_at,
                    finished_at: r.finished_at,
                    parent_run_id: r.parent_run_id,
                    scheduled_at: r.scheduled_at,
                })
            })
            .collect()
    }

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
            .query_one_raw(stmt(
                "UPDATE svc.schedule_passes p SET at = now() FROM \
                 (SELECT at FROM svc.schedule_passes FOR UPDATE) AS before RETURNING before.at",
                [],
            ))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("svc.schedule_passes has no row".into()))?;
        typed::column(&row, "at")
    }

    async fn published_workflow(
        &self,
        slug: &str,
    ) -> Result<Option<PublishedWorkflow>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT id, published FROM svc.workflows WHERE slug = $1 AND enabled AND published IS NOT NULL",
                [slug.into()],
            ))
            .await
            .map_err(map_err)?;
        row.map(|row| {
            Ok(PublishedWorkflow {
                id: typed::column(&row, "id")?,
                definition: typed::column(&row, "published")?,
            })
        })
        .transpose()
    }

    async fn schedules(
        &self,
        within: Duration,
        limit: u64,
    ) -> Result<Vec<ScheduleRecord>, StoreError> {
        let rows = self
            .db
            .query_all_raw(stmt(
                "SELECT id, published, schedule_next_at FROM svc.workflows \
                 WHERE schedule_next_at <= now() + make_interval(secs => $1) AND enabled AND published IS NOT NULL \
                 ORDER BY schedule_next_at LIMIT $2",
                [seconds(within), i64::try_from(limit).unwrap_or(i64::MAX).into()],
            ))
            .await
            .map_err(map_err)?;
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
            .query_all_raw(stmt(
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
            .await
            .map_err(map_err)?;
        rows.iter().map(claimed).collect()
    }

    async fn stored_start(
        &self,
        workflow_id: Uuid,
        run: Uuid,
    ) -> Result<Option<StoredStart>, StoreError> {
        let row = self
            .db
            .query_one_raw(stmt(
                "SELECT input, run_as FROM svc.workflow_runs WHERE id = $1 AND workflow_id = $2",
                [run.into(), workflow_id.into()],
            ))
            .await
            .map_err(map_err)?;
        row.map(|row| {
            Ok(StoredStart {
                input: typed::column(&row, "input")?,
                run_as: typed::column(&row, "run_as")?,
            })
        })
        .transpose()
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
