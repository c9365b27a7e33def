//! The run's records and its checkpoints.

use super::*;

impl Walk<'_> {
    /// Stores `record`, replacing an earlier one of the same step and iteration.
    pub(super) fn record(&self, record: StepRecord) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let key = (record.id.clone(), record.iteration.clone());
        records.changes += 1;
        let change = records.changes;
        match records.index.get(&key) {
            Some(&at) => {
                records.list[at] = record;
                records.changed[at] = change;
            }
            None => {
                let at = records.list.len();
                records.list.push(record);
                records.changed.push(change);
                records.index.insert(key, at);
            }
        }
    }

    /// A copy of the records.
    pub(super) fn snapshot(&self) -> (Vec<StepRecord>, u64) {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        (records.list.clone(), records.changes)
    }

    /// The records changed after change `since`, and the latest change.
    pub(super) fn changed_since(&self, since: u64) -> (Vec<StepRecord>, u64) {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let changed = records
            .list
            .iter()
            .zip(&records.changed)
            .filter(|(_, at)| **at > since)
            .map(|(record, _)| record.clone())
            .collect();
        (changed, records.changes)
    }

    /// Writes the records and renews the lease; `Some` when the run must
    /// stop (cancelled, or the lease lost). A checkpoint that waited while
    /// another wrote what it holds writes nothing more.
    pub(super) async fn checkpoint(&self) -> Result<Option<Flow>, StoreError> {
        let wanted = self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .changes;
        let mut written = self.writing.lock().await;
        if *written >= wanted {
            return Ok(None);
        }
        // Only what changed since the last write: a long loop's checkpoints
        // stay small.
        let (records, changes) = self.changed_since(*written);
        *written = changes;
        let answer = self
            .ports
            .journal
            .checkpoint(self.execution.run_id, self.execution.owner, &records)
            .await?;
        Ok(match answer {
            None => Some(Flow::Lost),
            Some(true) => Some(Flow::Cancelled),
            Some(false) => None,
        })
    }
}
