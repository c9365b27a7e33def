//! A step's attempts: `retry` with backoff, and `onError`.

use super::*;

impl Walk<'_> {
    /// Attempts a step with `retry` until one succeeds or the last fails,
    /// each failed attempt recorded (and checkpointed) before the wait.
    pub(super) async fn attempts(
        &self,
        step: &Step,
        retry: &Retry,
        scope: &mut Scope<'_>,
        record: &mut StepRecord,
    ) -> Result<Flow, StoreError> {
        loop {
            if let Some(last) = record.attempts.last() {
                let wait = retry_wait(retry, record.attempts.len());
                let until = last.finished_at + chrono::Duration::milliseconds(wait as i64);
                let remaining = (until - self.ports.clock.now()).num_milliseconds().max(0) as u64;
                if let Err(stop) = self
                    .watched(tokio::time::sleep(Duration::from_millis(remaining)))
                    .await?
                {
                    return Ok(stop);
                }
            }
            let began = self.ports.clock.now();
            let flow = self.action(step, scope, record).await?;
            let error = match flow {
                Flow::Fail(error) => error,
                Flow::Next(ref result) => {
                    if let Some(error) = failed_answer(step, result) {
                        error
                    } else {
                        record
                            .attempts
                            .push(attempt(began, self.ports.clock.now(), None));
                        return Ok(flow);
                    }
                }
                other => return Ok(other),
            };
            record
                .attempts
                .push(attempt(began, self.ports.clock.now(), Some(error.clone())));
            if record.attempts.len() >= retry.attempts as usize {
                return Ok(Flow::Fail(error));
            }
            record.error = Some(error);
            record.child_run_id = None;
            self.record(record.clone());
            if let Some(stop) = self.checkpoint().await? {
                return Ok(stop);
            }
        }
    }
}

/// The wait after `failed` attempts: `backoffMs * factor^(failed-1)`, at
/// most an hour.
pub(super) fn retry_wait(retry: &Retry, failed: usize) -> u64 {
    let exponent = i32::try_from(failed.saturating_sub(1)).unwrap_or(i32::MAX);
    let wait = retry.backoff_ms as f64 * retry.factor.powi(exponent);
    if wait.is_finite() {
        (wait as u64).min(RETRY_WAIT_MAX_MS)
    } else {
        RETRY_WAIT_MAX_MS
    }
}

pub(super) fn attempt(
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    error: Option<RunError>,
) -> Attempt {
    Attempt {
        started_at,
        finished_at,
        error,
    }
}

/// With `retry`, an http answer of 5xx or 429 is a failed attempt.
pub(super) fn failed_answer(step: &Step, result: &Value) -> Option<RunError> {
    if !matches!(step.action, Action::Http(_)) {
        return None;
    }
    let status = result.get("status").and_then(Value::as_u64)?;
    (status >= 500 || status == 429).then(|| {
        RunError::new(
            HTTP_REQUEST_FAILED,
            format!("The request was answered with status {status}"),
        )
    })
}
