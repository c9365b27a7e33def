//! `call`: a child run started, waited for, or followed on another
//! instance.

use super::*;

impl Walk<'_> {
    /// A child run of another published workflow, executed here (or, after
    /// a restart, followed where it runs); its outcome is the result, and a
    /// child that failed fails the step with its error.
    pub(super) async fn call(
        &self,
        call: &Call,
        scope: &Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        let execution = self.execution;
        let outcome = match record.child_run_id {
            Some(child) => self.follow(child).await?,
            None => {
                let input = render(&call.input, scope);
                let (records, _) = self.snapshot();
                let stored = self.ports.journal.stored(&input, &records);
                let request = ChildRequest {
                    parent: execution.run_id,
                    chain: &execution.chain,
                    slug: &call.workflow,
                    input: &stored,
                    run_as: execution.user.user_id,
                };
                let child = match execution.children.start(request).await? {
                    Ok(child) => child,
                    Err(refused) => return Ok(Flow::Fail(refused)),
                };
                record.child_run_id = Some(child.run_id);
                self.record(record.clone());
                if let Some(stop) = self.checkpoint().await? {
                    return Ok(stop);
                }
                let run = Execution {
                    run_id: child.run_id,
                    owner: execution.owner,
                    definition: child.definition,
                    context: context(input, child.user),
                    user: RunUser {
                        run_id: child.run_id,
                        user_id: execution.user.user_id,
                    },
                    allow_private: execution.allow_private,
                    recorded: Vec::new(),
                    cancel: execution.cancel.clone(),
                    chain: child.chain,
                    children: execution.children.clone(),
                    budget: execution.budget.clone(),
                };
                let ports = Ports {
                    journal: self.ports.journal.clone().child(&records),
                    ..self.ports.clone()
                };
                let mut inline: Boxed<'_, Option<Outcome>> = Box::pin(execute(&ports, run));
                match self.watched(&mut inline).await? {
                    // The child ends CANCELLED at its next boundary.
                    Err(Flow::Cancelled) => {
                        execution.cancel.send_replace(true);
                        inline.await?;
                        return Ok(Flow::Cancelled);
                    }
                    Err(stop) => Err(stop),
                    Ok(done) => match done? {
                        Some(outcome) => Ok(outcome),
                        // Another instance took the child over.
                        None => self.follow(child.run_id).await?,
                    },
                }
            }
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(stop) => return Ok(stop),
        };
        Ok(match outcome.status {
            RunStatus::Failed => Flow::Fail(outcome.error.unwrap_or_else(|| {
                RunError::new(crate::run::INTERRUPTED, "The called workflow failed")
            })),
            RunStatus::Cancelled => Flow::Cancelled,
            _ => Flow::Next(json!({
                "status": outcome.status.as_str(),
                "result": outcome.result,
                "error": outcome.error,
            })),
        })
    }

    /// Reads a child run's outcome until it ends.
    pub(super) async fn follow(&self, child: Uuid) -> Result<Result<Outcome, Flow>, StoreError> {
        let children = &self.execution.children;
        match self
            .watched(async {
                loop {
                    match children.outcome(child).await? {
                        Some(outcome) if outcome.status != RunStatus::Running => {
                            return Ok::<_, StoreError>(outcome);
                        }
                        None => {
                            return Ok(Outcome {
                                id: child,
                                status: RunStatus::Failed,
                                result: Value::Null,
                                error: Some(RunError::new(
                                    crate::run::INTERRUPTED,
                                    "The called workflow's run is gone",
                                )),
                            });
                        }
                        Some(_) => tokio::time::sleep(FOLLOW_CHILD_EVERY).await,
                    }
                }
            })
            .await?
        {
            Err(stop) => Ok(Err(stop)),
            Ok(read) => Ok(Ok(read?)),
        }
    }
}
