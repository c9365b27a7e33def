//! What a run stores carries no secret it received (API.md 16): the values
//! of credential headers become `[REDACTED]` wherever they appear (input,
//! step results and errors, the run's result and error), and so do the
//! `set-cookie` and `authorization` headers of http step answers. The steps
//! themselves see the values as received; only the stored copy changes.

use std::sync::Arc;

use async_trait::async_trait;
use kernel::StoreError;
use serde_json::Value;
use uuid::Uuid;

use crate::engine::RunJournal;
use crate::run::{Outcome, RunError, StepRecord};

/// Header values never stored or logged.
pub const REDACTED_HEADERS: [&str; 5] = [
    "authorization",
    "cookie",
    "set-cookie",
    "proxy-authorization",
    "x-api-key",
];
/// Headers of an http step's answer that are never stored.
const REDACTED_ANSWER_HEADERS: [&str; 2] = ["set-cookie", "authorization"];
/// What stands in for a secret.
pub(crate) const MARK: &str = "[REDACTED]";
/// Shorter values are not looked for inside other text (they would blot
/// out ordinary words); they are still replaced where they are whole.
const SECRET_MIN_CHARS: usize = 6;

/// `start.data` with credential header values replaced by `[REDACTED]`,
/// here and wherever else in it they appear.
pub fn redacted(start_data: &Value) -> Value {
    Secrets::of(start_data).redacted(start_data)
}

impl Secrets {
    /// [`redacted`] with the secrets of `start_data` already found.
    pub(crate) fn redacted(&self, start_data: &Value) -> Value {
        let mut stored = start_data.clone();
        self.scrub(&mut stored);
        if let Some(headers) = stored
            .pointer_mut("/meta/headers")
            .and_then(Value::as_object_mut)
        {
            for (name, value) in headers.iter_mut() {
                if REDACTED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    *value = Value::String(MARK.into());
                }
            }
        }
        stored
    }
}

/// The secrets a run received: its credential header values, and the
/// credential alone of an `authorization` value (`Bearer <it>`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    /// The secrets of `start.data`.
    pub(crate) fn of(start_data: &Value) -> Self {
        let mut found: Vec<String> = Vec::new();
        if let Some(headers) = start_data
            .pointer("/meta/headers")
            .and_then(Value::as_object)
        {
            for (name, value) in headers {
                let Some(text) = value.as_str() else { continue };
                if !REDACTED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                    continue;
                }
                found.push(text.to_owned());
                if let Some((_, credential)) = text.split_once(' ') {
                    found.push(credential.trim().to_owned());
                }
            }
        }
        found.retain(|s| !s.is_empty());
        // Longest first, so that a value is replaced before a part of it.
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        found.dedup();
        Self(found)
    }

    /// Replaces every secret in the strings of `value`.
    pub(crate) fn scrub(&self, value: &mut Value) {
        if self.0.is_empty() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Some(clean) = self.scrubbed(text) {
                    *text = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub(v)),
            Value::Object(fields) => fields.values_mut().for_each(|v| self.scrub(v)),
            _ => {}
        }
    }

    fn scrubbed(&self, text: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for secret in &self.0 {
            let current = out.as_deref().unwrap_or(text);
            if current == secret {
                out = Some(MARK.to_owned());
            } else if secret.chars().count() >= SECRET_MIN_CHARS
                && current.contains(secret.as_str())
            {
                out = Some(current.replace(secret.as_str(), MARK));
            }
        }
        out
    }

    fn scrub_error(&self, error: &mut Option<RunError>) {
        if let Some(error) = error
            && let Some(clean) = self.scrubbed(&error.message)
        {
            error.message = clean;
        }
    }

    /// These secrets and the credential headers of the http answers among
    /// `steps`, which later steps may have copied.
    fn with_answers(&self, steps: &[StepRecord]) -> Self {
        let mut found = self.0.clone();
        for step in steps.iter().filter(|s| s.kind == "http") {
            let Some(headers) = step.result.get("headers").and_then(Value::as_object) else {
                continue;
            };
            for (name, value) in headers {
                if REDACTED_ANSWER_HEADERS.contains(&name.to_ascii_lowercase().as_str())
                    && let Some(text) = value.as_str()
                    && !text.is_empty()
                {
                    found.push(text.to_owned());
                }
            }
        }
        found.sort_by_key(|s| std::cmp::Reverse(s.len()));
        found.dedup();
        Self(found)
    }

    /// `steps` as stored: secrets replaced, and http answers' credential
    /// headers redacted.
    fn steps(&self, steps: &[StepRecord]) -> Vec<StepRecord> {
        steps
            .iter()
            .map(|step| {
                let mut step = step.clone();
                self.scrub(&mut step.result);
                self.scrub_error(&mut step.error);
                for attempt in &mut step.attempts {
                    self.scrub_error(&mut attempt.error);
                }
                step
            })
            .collect()
    }
}

/// A journal that stores what its inner journal would, without the run's
/// secrets: those of its start, and those of every http answer it has
/// stored so far (checkpoints carry only the records that changed).
pub(crate) struct Redacting {
    inner: Arc<dyn RunJournal>,
    secrets: std::sync::Mutex<Secrets>,
}

impl Redacting {
    /// `inner`, storing nothing of `secrets`.
    pub(crate) fn wrap(inner: Arc<dyn RunJournal>, secrets: Secrets) -> Arc<dyn RunJournal> {
        Arc::new(Self {
            inner,
            secrets: std::sync::Mutex::new(secrets),
        })
    }

    /// The secrets known so far with those of the answers in `steps`,
    /// kept for later writes.
    fn learn(&self, steps: &[StepRecord]) -> Secrets {
        let mut known = self.secrets.lock().unwrap_or_else(|e| e.into_inner());
        *known = known.with_answers(steps);
        known.clone()
    }
}

#[async_trait]
impl RunJournal for Redacting {
    async fn checkpoint(
        &self,
        run: Uuid,
        owner: Uuid,
        steps: &[StepRecord],
    ) -> Result<Option<bool>, StoreError> {
        let secrets = self.learn(steps);
        self.inner
            .checkpoint(run, owner, &secrets.steps(steps))
            .await
    }

    async fn renew(&self, run: Uuid, owner: Uuid) -> Result<Option<bool>, StoreError> {
        self.inner.renew(run, owner).await
    }

    fn stored(&self, value: &Value, steps: &[StepRecord]) -> Value {
        let mut value = self.inner.stored(value, steps);
        self.learn(steps).scrub(&mut value);
        value
    }

    fn child(self: Arc<Self>, steps: &[StepRecord]) -> Arc<dyn RunJournal> {
        Self::wrap(self.inner.clone(), self.learn(steps))
    }

    async fn finish(
        &self,
        owner: Uuid,
        outcome: &Outcome,
        steps: &[StepRecord],
    ) -> Result<(), StoreError> {
        let secrets = self.learn(steps);
        let mut stored = outcome.clone();
        secrets.scrub(&mut stored.result);
        secrets.scrub_error(&mut stored.error);
        self.inner
            .finish(owner, &stored, &secrets.steps(steps))
            .await
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::run::RunStatus;

    #[test]
    fn redacts_credential_headers_only_in_the_stored_copy() {
        let data = json!({ "query": {}, "body": null, "meta": { "ip": "1.2.3.4", "headers": {
            "authorization": "Bearer x", "cookie": "a=b", "set-cookie": "c", "proxy-authorization": "p",
            "x-api-key": "k", "x-other": "kept" } } });
        let stored = redacted(&data);
        for name in REDACTED_HEADERS {
            assert_eq!(stored["meta"]["headers"][name], MARK);
        }
        assert_eq!(stored["meta"]["headers"]["x-other"], "kept");
        assert_eq!(data["meta"]["headers"]["authorization"], "Bearer x");
    }

    #[test]
    fn a_received_secret_is_replaced_wherever_it_was_copied() {
        let data = json!({ "body": { "echo": "token svc_abcdef123 here" },
            "meta": { "headers": { "authorization": "Bearer svc_abcdef123", "x-api-key": "key-987654" } } });
        let secrets = Secrets::of(&data);
        assert_eq!(redacted(&data)["body"]["echo"], "token [REDACTED] here");
        let mut result = json!({ "copied": "Bearer svc_abcdef123", "nested": ["key-987654", 3],
                                  "plain": "nothing secret" });
        secrets.scrub(&mut result);
        assert_eq!(
            result,
            json!({ "copied": MARK, "nested": [MARK, 3], "plain": "nothing secret" })
        );
    }

    #[test]
    fn http_answers_keep_no_cookie_or_authorization_nor_copies_of_them() {
        let step = StepRecord {
            id: "call".into(),
            kind: "http".into(),
            status: RunStatus::Succeeded,
            result: json!({ "status": 200, "headers": { "Set-Cookie": "sid=1", "authorization": "x",
                                                        "content-type": "text/plain" }, "body": "ok" }),
            error: None,
            started_at: Utc::now(),
            finished_at: None,
            iteration: Vec::new(),
            attempts: Vec::new(),
            child_run_id: None,
        };
        let copy = StepRecord {
            id: "copy".into(),
            kind: "transform".into(),
            result: json!({ "cookie": "sid=1" }),
            ..step.clone()
        };
        let steps = [step, copy];
        let stored = Secrets::default().with_answers(&steps).steps(&steps);
        assert_eq!(stored[0].result["headers"]["Set-Cookie"], MARK);
        assert_eq!(stored[0].result["headers"]["authorization"], MARK);
        assert_eq!(stored[0].result["headers"]["content-type"], "text/plain");
        assert_eq!(stored[1].result["cookie"], MARK, "a copy of the cookie too");
    }
}
