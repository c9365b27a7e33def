//! Runs as their callers see them: started, recorded, cancelled, their
//! results and their history.

use async_trait::async_trait;
use kernel::StoreError;
use serde_json::Value as Json;
use uuid::Uuid;
use workflows::run::{Outcome, RunRecord, StepRecord};
use workflows::store::{NewRun, ResultAsker, RunStore, RunUserRecord, StoredStart};

use super::rows::{RunRow, RunUserRow, error_of, outcome, status, steps_of};
use super::{json_of, seconds, uuids};
use crate::query::Query;
use crate::rows as typed;
use crate::{PgStore, execute, stmt, versions_of};

#[async_trait]
impl RunStore for PgStore {
    async fn run_user(&self, id: Uuid) -> Result<Option<RunUserRecord>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, k.* \
                 FROM svc.cache_version v LEFT JOIN LATERAL ( \
                   SELECT u.id, u.active, u.email, u.name, u.timezone, \
                   coalesce(array_agg(r.id) FILTER (WHERE r.id IS NOT NULL), '{}') AS role_ids, \
                   coalesce(bool_or(r.api_access), false) AS api_access, \
                   coalesce(bool_or(r.admin_access), false) AS admin \
                   FROM svc.users u LEFT JOIN svc.role_members m ON m.user_id = u.id \
                   LEFT JOIN svc.roles r ON r.id = m.role_id WHERE u.id = $1 GROUP BY u.id) k ON true",
                [id.into()],
            )).await?
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
        // On the reads' lane: a pure webhook run is stored by this one
        // statement, on the webhook's own hot path.
        self.lane_row(
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
            .fetch_optional(stmt(
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
            .await?;
        row.as_ref().map(outcome).transpose()
    }

    async fn run_outcome(&self, run: Uuid) -> Result<Option<Outcome>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT id, status, result, error FROM svc.workflow_runs WHERE id = $1",
                [run.into()],
            ))
            .await?;
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
            .fetch_all(stmt(
                "SELECT id, workflow_id, status, test, input, result, error, steps, started_at, finished_at, \
                 parent_run_id, scheduled_at FROM svc.workflow_runs WHERE workflow_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2 OFFSET $3",
                [
                    workflow_id.into(),
                    i64::try_from(limit).unwrap_or(i64::MAX).into(),
                    i64::try_from(offset).unwrap_or(i64::MAX).into(),
                ],
            )).await?;
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

    async fn stored_start(
        &self,
        workflow_id: Uuid,
        run: Uuid,
    ) -> Result<Option<StoredStart>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT input, run_as FROM svc.workflow_runs WHERE id = $1 AND workflow_id = $2",
                [run.into(), workflow_id.into()],
            ))
            .await?;
        row.map(|row| {
            Ok(StoredStart {
                input: typed::column(&row, "input")?,
                run_as: typed::column(&row, "run_as")?,
            })
        })
        .transpose()
    }
}
