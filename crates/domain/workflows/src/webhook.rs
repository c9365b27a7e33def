//! Webhook calls (`/api/workflows/{slug}/webhook`): the workflow found by
//! slug and method (with the public rate limit in the same statement), the
//! caller checked, the run started and answered at once or awaited; the
//! result route; the published definitions kept parsed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kernel::settings::PUBLIC_RATE_LIMIT_KEY;
use permissions::{Plane, Principal};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::error::WorkflowError;
use crate::model::{
    Definition, ResponseMode, Trigger, WAIT_SECONDS_DEFAULT, WebhookAccess, WebhookMethod,
};
use crate::run::Outcome;
use crate::runner::RunStart;
use crate::service::WorkflowService;
use crate::store::{ResultAsker, WebhookLookup, WebhookTarget};

/// A webhook's body as `start.data.body`: none is null; otherwise a JSON
/// object or array, anything else 400 INVALID_WEBHOOK_PAYLOAD.
fn webhook_body(bytes: Option<&[u8]>) -> Result<Value, WorkflowError> {
    match bytes.map(serde_json::from_slice::<Value>) {
        None => Ok(Value::Null),
        Some(Ok(value @ (Value::Object(_) | Value::Array(_)))) => Ok(value),
        Some(_) => Err(WorkflowError::InvalidWebhookPayload),
    }
}

/// A webhook call as received.
#[derive(Debug, Clone)]
pub struct WebhookCall<'a> {
    /// The workflow's slug.
    pub slug: &'a str,
    /// GET or POST.
    pub method: WebhookMethod,
    /// The bearer credential, if sent.
    pub bearer: Option<&'a str>,
    /// Query parameters: each a string or a list of strings.
    pub query: Map<String, Value>,
    /// The raw POST body (None for GET).
    pub body: Option<&'a [u8]>,
    /// Header names (lower case) and values.
    pub headers: Map<String, Value>,
    /// The caller's address.
    pub ip: String,
}

/// How a webhook call is answered.
#[derive(Debug, Clone)]
pub enum WebhookAnswer {
    /// 202 `{ run }`.
    Started(Uuid),
    /// 200 with the outcome.
    Finished(Outcome),
}

impl WorkflowService {
    /// Answers a webhook call per the specification.
    pub async fn invoke(&self, call: WebhookCall<'_>) -> Result<WebhookAnswer, WorkflowError> {
        let rate_key = format!("webhook:{}", call.ip);
        let target = self
            .store
            .webhook(WebhookLookup {
                slug: call.slug,
                method: call.method.as_str(),
                rate_key: &rate_key,
                public_access: WebhookAccess::Public.as_str(),
                default_access: WebhookAccess::default().as_str(),
                default_method: WebhookMethod::default().as_str(),
                rate_limit_key: PUBLIC_RATE_LIMIT_KEY,
                rate_limit_default: self.rate_limit_default,
            })
            .await?
            .ok_or(WorkflowError::WebhookNotFound)?;
        let definition = self.published.get(&target)?;
        let Trigger::Webhook(hook) = &definition.trigger else {
            return Err(WorkflowError::WebhookNotFound);
        };
        if hook.method != call.method {
            return Err(WorkflowError::WebhookNotFound);
        }
        let (run_as, caller_id) = match hook.access {
            WebhookAccess::Public => {
                if let Some(retry_after) = target.retry_after {
                    return Err(WorkflowError::RateLimited { retry_after });
                }
                (hook.execute_as.ok_or(WorkflowError::WebhookNotFound)?, None)
            }
            WebhookAccess::Authenticated => {
                let bearer = call.bearer.ok_or(auth::AuthError::AuthenticationRequired)?;
                let caller = self.auth.resolve(bearer).await?.principal;
                caller
                    .authorize(Plane::Api, false)
                    .map_err(|e| WorkflowError::Auth(auth::AuthError::Denied(e)))?;
                let granted = caller
                    .role_ids
                    .iter()
                    .any(|r| target.invoke_roles.contains(r));
                if !caller.admin && !granted {
                    return Err(WorkflowError::ActionDenied);
                }
                (
                    hook.execute_as.unwrap_or(caller.user_id),
                    Some(caller.user_id),
                )
            }
        };
        let settings = self.settings.current().await?;
        let body = webhook_body(call.body)?;
        let start_data = json!({
            "query": call.query,
            "body": body,
            "meta": { "ip": call.ip, "headers": call.headers },
        });
        let response = hook.response;
        let wait =
            Duration::from_secs(u64::from(hook.wait_seconds.unwrap_or(WAIT_SECONDS_DEFAULT)))
                .min(Duration::from_millis(settings.max_sync_wait_ms()));
        let on_timeout = hook.on_timeout.unwrap_or_default();
        let (run, handle) = self
            .start(RunStart {
                workflow_id: target.workflow_id,
                test: false,
                definition: definition.clone(),
                stored: target.definition,
                start_data,
                run_as,
                caller_id,
                allow_private: settings.http_allow_private(),
            })
            .await?;
        match response {
            // A pure run is stored when it ends, at once: answer once it is.
            ResponseMode::Async if run.stored_at_end => match handle.await {
                Ok(Some(_)) => Ok(WebhookAnswer::Started(run.id)),
                _ => Err(WorkflowError::Store(kernel::StoreError::Unavailable(
                    "the run could not be stored".into(),
                ))),
            },
            ResponseMode::Async => Ok(WebhookAnswer::Started(run.id)),
            ResponseMode::Sync => self
                .await_outcome(run, handle, wait, Some(on_timeout))
                .await
                .map(WebhookAnswer::Finished),
        }
    }

    /// `GET /api/workflows/runs/{id}/result`.
    /// `caller` is resolved and authorized on the Data API plane.
    pub async fn result(&self, caller: &Principal, run: &str) -> Result<Outcome, WorkflowError> {
        let run: Uuid = run.parse().map_err(|_| WorkflowError::RunNotFound)?;
        let asker = ResultAsker {
            user_id: caller.user_id,
            role_ids: &caller.role_ids,
            admin: caller.admin,
        };
        self.store
            .run_result(run, asker)
            .await?
            .ok_or(WorkflowError::RunNotFound)
    }
}

/// Most published definitions kept parsed; past it the memory starts afresh.
const PUBLISHED_MAX: usize = 1_000;

/// Published snapshots, parsed once per definition rather than on every
/// webhook call. A publication is known by its workflow and its stored
/// definition itself, which every webhook call reads: a write that changes
/// the definition without a new publish (a table renamed, a snapshot
/// applied) is seen at the next call, on every instance.
#[derive(Default)]
pub(crate) struct PublishedDefinitions(RwLock<HashMap<Uuid, Publication>>);

/// A published definition as stored, and parsed.
type Publication = (Value, Arc<Definition>);

impl PublishedDefinitions {
    fn get(&self, target: &WebhookTarget) -> Result<Arc<Definition>, WorkflowError> {
        let known = self.0.read().ok().and_then(|map| {
            map.get(&target.workflow_id)
                .filter(|(stored, _)| *stored == target.definition)
                .map(|(_, definition)| definition.clone())
        });
        if let Some(definition) = known {
            return Ok(definition);
        }
        let definition = Arc::new(Definition::from_stored(&target.definition)?);
        if let Ok(mut map) = self.0.write() {
            if map.len() >= PUBLISHED_MAX {
                map.clear();
            }
            map.insert(
                target.workflow_id,
                (target.definition.clone(), definition.clone()),
            );
        }
        Ok(definition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// Any bytes, JSON-like text included: an object or array, or the
        /// refusal, never a panic.
        #[test]
        fn webhook_bodies_are_objects_arrays_or_refused(
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                "[\\[\\]{}\",:0-9a-z \\\\]{0,40}".prop_map(String::into_bytes),
            ]
        ) {
            match webhook_body(Some(&bytes)) {
                Ok(value) => prop_assert!(matches!(value, Value::Object(_) | Value::Array(_))),
                Err(error) => prop_assert!(matches!(error, crate::WorkflowError::InvalidWebhookPayload)),
            }
        }
    }

    #[test]
    fn no_body_is_null_and_scalars_are_refused() {
        assert_eq!(webhook_body(None).ok(), Some(Value::Null));
        for refused in [&b"1"[..], b"\"x\"", b"null", b"", b"{"] {
            assert!(webhook_body(Some(refused)).is_err());
        }
        assert!(webhook_body(Some(b"{\"a\":[1]}")).is_ok());
    }
}
