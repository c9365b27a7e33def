//! The run journal: checkpoints, lease renewal and a run's end, each
//! only while the instance still holds the run's lease.

use async_trait::async_trait;
use kernel::StoreError;
use uuid::Uuid;
use workflows::RunJournal;
use workflows::run::{Outcome, StepRecord};

use super::json_of;
use crate::query::Query;
use crate::rows as typed;
use crate::{PgStore, execute, stmt};

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
            .fetch_optional(stmt(
                "UPDATE svc.workflow_runs SET steps = steps || $3, lease_until = now() + (lease_until - lease_start), \
                 lease_start = now() WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING' RETURNING cancel_requested",
                [run.into(), owner.into(), json_of(&steps)?.into()],
            )).await?;
        row.map(|r| typed::column(&r, "cancel_requested"))
            .transpose()
    }

    async fn renew(&self, run: Uuid, owner: Uuid) -> Result<Option<bool>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "UPDATE svc.workflow_runs SET lease_until = now() + (lease_until - lease_start), lease_start = now() \
                 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING' RETURNING cancel_requested",
                [run.into(), owner.into()],
            )).await?;
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
