//! Effects outside the run, watched: the lease renewed while they take
//! long, cancellation heeded.

use super::*;

impl Walk<'_> {
    /// A step's effect, under the lease; a stop becomes the step's flow.
    pub(super) async fn effect(
        &self,
        work: impl Future<Output = Flow>,
    ) -> Result<Flow, StoreError> {
        Ok(self.watched(work).await?.unwrap_or_else(|stop| stop))
    }

    /// Runs `work` while renewing the lease, and stops at once when the run
    /// is cancelled in this process: `Err` holds the flow that stops it.
    pub(super) async fn watched<T>(
        &self,
        work: impl Future<Output = T>,
    ) -> Result<Result<T, Flow>, StoreError> {
        tokio::pin!(work);
        let execution = self.execution;
        let mut cancel = execution.cancel.subscribe();
        if *cancel.borrow() {
            return Ok(Err(Flow::Cancelled));
        }
        loop {
            tokio::select! {
                done = &mut work => return Ok(Ok(done)),
                Ok(()) = cancel.changed() => {
                    if *cancel.borrow() {
                        return Ok(Err(Flow::Cancelled));
                    }
                }
                () = tokio::time::sleep(self.ports.renew_every) => {
                    match self.ports.journal.renew(execution.run_id, execution.owner).await? {
                        None => return Ok(Err(Flow::Lost)),
                        Some(true) => return Ok(Err(Flow::Cancelled)),
                        Some(false) => {}
                    }
                }
            }
        }
    }
}
