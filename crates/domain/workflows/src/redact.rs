//! What a run stores carries no secret it received (API.md 16 and 21): the
//! values of credential headers and credential query parameters become
//! `[REDACTED]` wherever they appear (input, step results and errors, the
//! run's result and error), and so do the credential headers of http step
//! answers (`set-cookie`, `authorization`, `x-auth-token`, ...). The steps themselves see the values as
//! received; only the stored copy changes. The same rules name what an
//! exported definition leaves out ([`crate::exported`]).

use std::sync::Arc;

use async_trait::async_trait;
use kernel::StoreError;
use serde_json::Value;
use uuid::Uuid;

use crate::engine::RunJournal;
use crate::run::{Outcome, RunError, StepRecord};

/// Headers whose values are never stored or logged, besides those
/// [`CREDENTIAL_HEADER_PARTS`] name.
const REDACTED_HEADERS: [&str; 2] = ["cookie", "set-cookie"];
/// A header whose name contains one of these, in any case, carries a
/// credential (`Authorization`, `X-Auth-Token`, `X-Api-Key`, ...).
const CREDENTIAL_HEADER_PARTS: [&str; 6] =
    ["token", "secret", "key", "auth", "password", "signature"];
/// Query parameters, in any case, whose values are credentials.
const CREDENTIAL_PARAMS: [&str; 8] = [
    "token",
    "key",
    "apikey",
    "api_key",
    "secret",
    "password",
    "signature",
    "access_token",
];
/// What stands in for a secret.
pub(crate) const MARK: &str = "[REDACTED]";
/// Shorter values are not looked for inside other text (they would blot
/// out ordinary words); they are still replaced where they are whole.
const SECRET_MIN_CHARS: usize = 6;

/// Whether a header named `name` carries a credential.
pub(crate) fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    REDACTED_HEADERS.contains(&lower.as_str())
        || CREDENTIAL_HEADER_PARTS
            .iter()
            .any(|part| lower.contains(part))
}

/// Whether a query parameter named `name` (percent-encoded or not) carries
/// a credential.
pub(crate) fn is_credential_param(name: &str) -> bool {
    let decoded = percent_decoded(name).to_ascii_lowercase();
    CREDENTIAL_PARAMS.contains(&decoded.as_str())
}

/// `text` with `%XX` sequences and `+` decoded (invalid ones kept as
/// written).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| {
            bytes
                .get(at)
                .and_then(|b| char::from(*b).to_digit(16))
                .and_then(|d| u8::try_from(d).ok())
        };
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push(high * 16 + low);
                i += 3;
                continue;
            }
            (b'+', _, _) => out.push(b' '),
            (other, _, _) => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the credentials of `url` are: its pieces in order, each marked
/// when it is one (the password of the user-info part, or the whole of a
/// user-info part without one, and the values of [`CREDENTIAL_PARAMS`]). Joined, the pieces are `url`.
pub(crate) fn url_pieces(url: &str) -> Vec<(&str, bool)> {
    let mut secrets: Vec<(usize, usize)> = Vec::new();
    // The authority follows `scheme://`, up to the path, query or fragment.
    if let Some(scheme_end) = url.find("://")
        && url[..scheme_end]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        let start = scheme_end + 3;
        let end = url[start..]
            .find(['/', '?', '#'])
            .map_or(url.len(), |i| start + i);
        // The password of `user:password@`, or the whole of a `token@`.
        if let Some(at) = url[start..end].rfind('@') {
            let colon = url[start..start + at].find(':');
            secrets.push((colon.map_or(start, |c| start + c + 1), start + at));
        }
    }
    if let Some(question) = url.find('?') {
        let start = question + 1;
        let end = url[start..].find('#').map_or(url.len(), |i| start + i);
        let mut at = start;
        for pair in url[start..end].split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && is_credential_param(name)
            {
                let value_start = at + name.len() + 1;
                secrets.push((value_start, value_start + value.len()));
            }
            at += pair.len() + 1;
        }
    }
    let mut pieces = Vec::with_capacity(secrets.len() * 2 + 1);
    let mut at = 0;
    for (start, end) in secrets {
        pieces.push((&url[at..start], false));
        pieces.push((&url[start..end], true));
        at = end;
    }
    pieces.push((&url[at..], false));
    pieces
}

/// `url` with its credentials replaced by `[REDACTED]`.
pub(crate) fn redacted_url(url: &str) -> String {
    url_pieces(url)
        .into_iter()
        .map(|(piece, secret)| if secret { MARK } else { piece })
        .collect()
}

/// `start.data` with credential header values (and credential query
/// parameters) replaced by `[REDACTED]`, here and wherever else in it they
/// appear.
pub fn redacted(start_data: &Value) -> Value {
    Secrets::of(start_data).redacted(start_data)
}

impl Secrets {
    /// [`redacted`] with the secrets of `start_data` already found.
    pub(crate) fn redacted(&self, start_data: &Value) -> Value {
        let mut stored = start_data.clone();
        self.scrub(&mut stored);
        for (pointer, is_credential) in CREDENTIAL_FIELDS {
            if let Some(fields) = stored.pointer_mut(pointer).and_then(Value::as_object_mut) {
                for (name, value) in fields.iter_mut() {
                    if is_credential(name) {
                        *value = Value::String(MARK.into());
                    }
                }
            }
        }
        stored
    }
}

/// Whether a field's name says its value is a credential.
type NamesCredential = fn(&str) -> bool;

/// Where a start's credentials are: its headers and its query, each with
/// the rule that names them.
const CREDENTIAL_FIELDS: [(&str, NamesCredential); 2] = [
    ("/meta/headers", is_credential_header),
    ("/query", is_credential_param),
];

/// The secrets a run received: its credential header and query values,
/// and the credential alone of a header's `<scheme> <it>` value (`Bearer
/// <it>`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    /// The secrets of `start.data`.
    pub(crate) fn of(start_data: &Value) -> Self {
        let mut found: Vec<String> = Vec::new();
        for (pointer, is_credential) in CREDENTIAL_FIELDS {
            let Some(fields) = start_data.pointer(pointer).and_then(Value::as_object) else {
                continue;
            };
            for (name, value) in fields {
                if !is_credential(name) {
                    continue;
                }
                // A repeated query parameter holds a list of values.
                let texts = match value {
                    Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                    other => other.as_str().into_iter().collect::<Vec<_>>(),
                };
                for text in texts {
                    found.push(text.to_owned());
                    if let Some((_, credential)) = text.split_once(' ') {
                        found.push(credential.trim().to_owned());
                    }
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
                if is_credential_header(name)
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
                for line in &mut step.logs {
                    if let Some(clean) = self.scrubbed(line) {
                        *line = clean;
                    }
                }
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
        for name in [
            "authorization",
            "cookie",
            "set-cookie",
            "proxy-authorization",
            "x-api-key",
        ] {
            assert_eq!(stored["meta"]["headers"][name], MARK);
        }
        assert_eq!(stored["meta"]["headers"]["x-other"], "kept");
        assert_eq!(data["meta"]["headers"]["authorization"], "Bearer x");
    }

    #[test]
    fn headers_naming_a_credential_and_credential_parameters_are_redacted() {
        let data = json!({ "query": { "Access_Token": "at-123456", "page": "2", "%6Bey": ["k-1234567"] },
            "body": { "copied": "at-123456" },
            "meta": { "headers": { "X-Auth-Token": "tok-1234567", "X-Signature": "sig",
                "X-Client-Secret": "s", "X-Password": "p", "Accept": "json" } } });
        let stored = redacted(&data);
        for name in [
            "X-Auth-Token",
            "X-Signature",
            "X-Client-Secret",
            "X-Password",
        ] {
            assert_eq!(stored["meta"]["headers"][name], MARK, "{name}");
        }
        assert_eq!(stored["meta"]["headers"]["Accept"], "json");
        assert_eq!(stored["query"]["Access_Token"], MARK);
        assert_eq!(stored["query"]["%6Bey"], MARK);
        assert_eq!(stored["query"]["page"], "2");
        assert_eq!(stored["body"]["copied"], MARK, "a copy of a credential too");
    }

    #[test]
    fn a_urls_password_and_credential_parameters_are_its_secrets() {
        let url = "https://user:pa:ss@api.test:8443/v1?page=2&TOKEN=t0k&api_key=&%73ecret=s#key=k";
        assert_eq!(
            redacted_url(url),
            "https://user:[REDACTED]@api.test:8443/v1?page=2&TOKEN=[REDACTED]&api_key=[REDACTED]&%73ecret=[REDACTED]#key=k"
        );
        let joined: String = url_pieces(url).into_iter().map(|(p, _)| p).collect();
        assert_eq!(joined, url);
        assert_eq!(
            redacted_url("https://ghp_x1@git.test/r"),
            "https://[REDACTED]@git.test/r"
        );
        for plain in [
            "https://api.test/?tokens=1",
            "https://api.test/a:b@c",
            "/relative?page=1",
        ] {
            assert_eq!(redacted_url(plain), plain);
        }
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
                                                        "X-Auth-Token": "t-1",
                                                        "content-type": "text/plain" }, "body": "ok" }),
            error: None,
            started_at: Utc::now(),
            finished_at: None,
            iteration: Vec::new(),
            attempts: Vec::new(),
            child_run_id: None,
            logs: Vec::new(),
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
        assert_eq!(stored[0].result["headers"]["X-Auth-Token"], MARK);
        assert_eq!(stored[0].result["headers"]["content-type"], "text/plain");
        assert_eq!(stored[1].result["cookie"], MARK, "a copy of the cookie too");
    }
}
