//! Child runs of call steps, in the store: the called workflow looked up by
//! slug (published and enabled), the depth and cycle limits, and the child
//! stored RUNNING and leased to this instance, which executes it inline.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kernel::{StoreError, new_id};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::engine::{ChildRequest, ChildRun, ChildRuns};
use crate::model::{CALL_DEPTH_MAX, Definition};
use crate::run::{CALL_DEPTH, Outcome, RunError, WORKFLOW_NOT_FOUND};
use crate::store::{NewRun, WorkflowStore};

/// Child runs stored through a [`WorkflowStore`], leased to `owner`.
pub(crate) struct StoreChildren {
    pub(crate) store: Arc<dyn WorkflowStore>,
    pub(crate) owner: Uuid,
    pub(crate) lease: Duration,
}

#[async_trait]
impl ChildRuns for StoreChildren {
    async fn start(
        &self,
        request: ChildRequest<'_>,
    ) -> Result<Result<ChildRun, RunError>, StoreError> {
        let not_found = || {
            RunError::new(
                WORKFLOW_NOT_FOUND,
                format!(
                    "No published, enabled workflow has the slug {}",
                    request.slug
                ),
            )
        };
        // The caller is at depth chain.len() - 1; its child one deeper.
        if request.chain.len() > CALL_DEPTH_MAX {
            return Ok(Err(RunError::new(
                CALL_DEPTH,
                format!("A call may not reach depth {}", CALL_DEPTH_MAX + 1),
            )));
        }
        let Some(called) = self.store.published_workflow(request.slug).await? else {
            return Ok(Err(not_found()));
        };
        if request.chain.contains(&called.id) {
            return Ok(Err(RunError::new(
                CALL_DEPTH,
                format!("{} is already in this run's chain of calls", request.slug),
            )));
        }
        let Ok(definition) = Definition::from_stored(&called.definition) else {
            return Ok(Err(not_found()));
        };
        let user = if definition.reads_user() {
            match self.store.run_user(request.run_as).await? {
                Some(found) => found.profile,
                None => Value::Null,
            }
        } else {
            json!({ "id": request.run_as })
        };
        let mut chain = request.chain.to_vec();
        chain.push(called.id);
        let run_id = new_id();
        self.store
            .start_run(NewRun {
                id: run_id,
                workflow_id: called.id,
                test: false,
                definition: called.definition,
                input: request.input.clone(),
                run_as: request.run_as,
                caller_id: None,
                owner: self.owner,
                lease: self.lease,
                parent_run_id: Some(request.parent),
                chain: chain.clone(),
            })
            .await?;
        Ok(Ok(ChildRun {
            run_id,
            definition: Arc::new(definition),
            chain,
            user,
        }))
    }

    async fn outcome(&self, run: Uuid) -> Result<Option<Outcome>, StoreError> {
        self.store.run_outcome(run).await
    }
}
