//! Scripts run on blocking threads, at most `workflows.script_concurrency`
//! at once: a run waiting for its turn spends its own time.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::{Limits, Outcome, ScriptError};

/// How long past its deadline a run is waited for.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The bounded pool of script runs.
#[derive(Debug)]
pub struct ScriptPool {
    /// The permits of the current size, with that size.
    turns: Mutex<(usize, Arc<Semaphore>)>,
}

impl Default for ScriptPool {
    fn default() -> Self {
        Self::new(1)
    }
}

impl ScriptPool {
    /// Runs at once now.
    pub fn size(&self) -> usize {
        self.turns.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// A pool of `size` runs at once.
    pub fn new(size: usize) -> Self {
        let size = size.max(1);
        Self {
            turns: Mutex::new((size, Arc::new(Semaphore::new(size)))),
        }
    }

    /// The permits for `size` runs at once: a new size takes new permits
    /// (runs under the old ones end as they would).
    fn turns(&self, size: usize) -> Arc<Semaphore> {
        let size = size.max(1);
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        if turns.0 != size {
            *turns = (size, Arc::new(Semaphore::new(size)));
        }
        Arc::clone(&turns.1)
    }

    /// Runs `code` with `input` within `limits`, at most `size` at once;
    /// the wait for a turn counts against the timeout.
    pub async fn run(&self, size: usize, code: Arc<str>, input: Value, limits: Limits) -> Outcome {
        let started = Instant::now();
        let turns = self.turns(size);
        let Ok(Ok(turn)) = tokio::time::timeout(limits.timeout, turns.acquire_owned()).await else {
            return Outcome {
                result: Err(ScriptError::Timeout),
                logs: Vec::new(),
            };
        };
        let ran = tokio::task::spawn_blocking(move || {
            let outcome = crate::run(&code, &input, limits, started);
            drop(turn);
            outcome
        });
        // The sandbox stops itself at the deadline; past it and a grace,
        // the step ends anyway (the thread keeps its turn until it stops).
        match tokio::time::timeout(limits.timeout + STOP_GRACE, ran).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Outcome {
                result: Err(ScriptError::Failed("the script's thread stopped".into())),
                logs: Vec::new(),
            },
            Err(_) => Outcome {
                result: Err(ScriptError::Timeout),
                logs: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn limits(ms: u64) -> Limits {
        Limits {
            timeout: Duration::from_millis(ms),
            memory_bytes: 16 << 20,
        }
    }

    #[tokio::test]
    async fn a_run_waiting_for_its_turn_spends_its_own_time() {
        let pool = Arc::new(ScriptPool::new(1));
        let endless: Arc<str> = "export default function () { for (;;) {} }".into();
        let quick: Arc<str> = "export default function () { return 1 }".into();
        let busy = {
            let pool = Arc::clone(&pool);
            let endless = Arc::clone(&endless);
            tokio::spawn(async move { pool.run(1, endless, json!({}), limits(500)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let waited = pool
            .run(1, Arc::clone(&quick), json!({}), limits(100))
            .await;
        assert_eq!(waited.result, Err(ScriptError::Timeout));
        assert_eq!(busy.await.unwrap().result, Err(ScriptError::Timeout));
        let after = pool.run(1, quick, json!({}), limits(500)).await;
        assert_eq!(after.result, Ok(json!(1)));
    }
}
