//! Runs an administrator starts: a manual run of the published version
//! with an input, and the replay of a stored run with its stored input.

use std::sync::Arc;

use permissions::Principal;
use serde_json::Value;
use uuid::Uuid;

use crate::error::WorkflowError;
use crate::model::Definition;
use crate::run::{RunRecord, RunStatus};
use crate::runner::RunStart;
use crate::service::WorkflowService;

impl WorkflowService {
    /// `POST /admin/api/workflows/{id}/run`: a run of the published version
    /// as the administrator, with `start.data = input` (API.md 15).
    pub async fn run_manually(
        &self,
        caller: &Principal,
        id: Uuid,
        input: Value,
    ) -> Result<RunRecord, WorkflowError> {
        self.start_published(id, input, None, caller.user_id).await
    }

    /// `POST /admin/api/workflows/{id}/runs/{runId}/replay`: a run of the
    /// current published version with that run's stored (redacted) input,
    /// as the trigger's Execute as, else as that run's user.
    pub async fn replay(
        &self,
        caller: &Principal,
        id: Uuid,
        run: Uuid,
    ) -> Result<RunRecord, WorkflowError> {
        let stored = self
            .store
            .stored_start(id, run)
            .await?
            .ok_or(WorkflowError::RunNotFound)?;
        self.start_published(id, stored.input, Some(stored.run_as), caller.user_id)
            .await
    }

    /// Starts a run of `id`'s published version in the background (409
    /// when never published, or disabled): a replay of a run of `replayed`
    /// as the trigger's Execute as, else as that user; a manual run as the
    /// administrator `caller`.
    async fn start_published(
        &self,
        id: Uuid,
        input: Value,
        replayed: Option<Uuid>,
        caller: Uuid,
    ) -> Result<RunRecord, WorkflowError> {
        let workflow = self.get(id).await?;
        let stored = workflow
            .published
            .filter(|_| workflow.enabled)
            .ok_or(WorkflowError::NotRunnable)?;
        let definition =
            Definition::from_stored(&stored).map_err(|_| WorkflowError::NotRunnable)?;
        let run_as = match replayed {
            Some(user) => definition.trigger.execute_as().unwrap_or(user),
            None => caller,
        };
        let settings = self.settings.current().await?;
        let redacted = crate::redact::redacted(&input);
        let (run, _handle) = self
            .start(RunStart {
                workflow_id: id,
                test: false,
                definition: Arc::new(definition),
                stored,
                start_data: input,
                run_as,
                caller_id: Some(caller),
                allow_private: settings.http_allow_private(),
            })
            .await?;
        Ok(RunRecord {
            id: run.id,
            workflow_id: id,
            status: RunStatus::Running,
            test: false,
            input: redacted,
            result: Value::Null,
            error: None,
            started_at: self.ports.clock.now(),
            finished_at: None,
            steps: Vec::new(),
            parent_run_id: None,
            scheduled_at: None,
        })
    }
}
