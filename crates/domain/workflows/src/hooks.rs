//! Write hooks (API.md 18): the Data API's [`data::WriteHooks`] port, run
//! by the step executor. A hook runs synchronously as the writer, within
//! `workflows.hook_timeout_ms`, and nothing of its run is stored: its
//! steps only compute, read and end the run (checked when it is saved).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use data::{Hook, HookCall, HookRefusal, WriteEvent, WriteHooks};
use kernel::{StoreError, new_id};
use serde_json::{Value, json};
use tokio::sync::watch;
use uuid::Uuid;

use crate::engine::{self, Execution, Ports, RunJournal, RunUser};
use crate::model::Definition;
use crate::run::{Outcome, RunStatus, StepRecord};
use crate::service::WorkflowService;

/// Parsed hook definitions kept at most; past it the cache starts over.
const PARSED_MAX: usize = 256;

/// A hook's definition as the catalog holds it, and parsed.
type Parsed = (Arc<Value>, Arc<Definition>);

/// The hooks of the Data API, run by the workflow executor.
pub struct WorkflowHooks {
    service: WorkflowService,
    /// Each hook's definition as the catalog holds it, and parsed.
    parsed: RwLock<HashMap<Uuid, Parsed>>,
}

impl WorkflowService {
    /// The runner of the Data API's write hooks.
    pub fn write_hooks(&self) -> Arc<dyn WriteHooks> {
        Arc::new(WorkflowHooks {
            service: self.clone(),
            parsed: RwLock::default(),
        })
    }
}

impl WorkflowHooks {
    /// The hook's published definition, parsed once per version of it.
    fn definition(&self, hook: &Hook) -> Result<Arc<Definition>, HookRefusal> {
        let known = self.parsed.read().ok().and_then(|map| {
            map.get(&hook.workflow_id)
                .filter(|(stored, _)| {
                    Arc::ptr_eq(stored, &hook.definition) || **stored == *hook.definition
                })
                .map(|(_, parsed)| parsed.clone())
        });
        if let Some(parsed) = known {
            return Ok(parsed);
        }
        let parsed =
            Definition::from_stored(&hook.definition).map_err(|_| HookRefusal::Failed {
                code: "HOOK_INVALID".into(),
                message: format!("The hook {} can no longer be read", hook.slug),
            })?;
        let parsed = Arc::new(parsed);
        if let Ok(mut map) = self.parsed.write() {
            if map.len() >= PARSED_MAX {
                map.clear();
            }
            map.insert(hook.workflow_id, (hook.definition.clone(), parsed.clone()));
        }
        Ok(parsed)
    }

    /// Runs one hook on `start` as `user_id`: its outcome, or a refusal
    /// when it ran too long or the store failed.
    async fn run_one(
        &self,
        hook: &Hook,
        start: Value,
        user_id: Uuid,
        timeout: std::time::Duration,
    ) -> Result<Outcome, HookRefusal> {
        let service = &self.service;
        let definition = self.definition(hook)?;
        let run = async {
            let user = match definition.reads_user() {
                true => match service.store.run_user(user_id).await? {
                    Some(record) => record.profile,
                    None => Value::Null,
                },
                false => json!({ "id": user_id }),
            };
            let run_id = new_id();
            let execution = Execution {
                run_id,
                owner: service.owner,
                definition,
                context: engine::context(start, user),
                user: RunUser { run_id, user_id },
                allow_private: false,
                recorded: Vec::new(),
                cancel: Arc::new(watch::channel(false).0),
                chain: vec![hook.workflow_id],
                budget: engine::step_budget(),
                children: service.children.clone(),
            };
            let ports = Ports {
                journal: Arc::new(Unrecorded),
                ..service.ports.clone()
            };
            engine::execute(&ports, execution).await
        };
        match tokio::time::timeout(timeout, run).await {
            Err(_) => Err(HookRefusal::TimedOut),
            Ok(Err(error)) => Err(HookRefusal::Store(error)),
            Ok(Ok(None)) => Err(HookRefusal::Store(StoreError::Internal(
                "a hook's run ended without an outcome".into(),
            ))),
            Ok(Ok(Some(outcome))) => Ok(outcome),
        }
    }
}

#[async_trait]
impl WriteHooks for WorkflowHooks {
    async fn run(&self, call: HookCall<'_>) -> Result<Value, HookRefusal> {
        let timeout = self
            .service
            .settings
            .current()
            .await
            .map_err(|_| HookRefusal::Store(StoreError::Unavailable("settings unreadable".into())))?
            .hook_timeout();
        let HookCall {
            hooks,
            user_id,
            event,
            resource,
            old,
            mut new,
        } = call;
        for hook in hooks {
            let start = engine::event_data(event.as_str(), &resource, old.clone(), new.clone());
            let outcome = self.run_one(hook, start, user_id, timeout).await?;
            match outcome.status {
                RunStatus::Succeeded => {
                    // An object result is written over the row (not on delete).
                    if let (Value::Object(set), Value::Object(row)) = (outcome.result, &mut new)
                        && event != WriteEvent::Delete
                    {
                        row.extend(set);
                    }
                }
                _ => {
                    let error = outcome.error.unwrap_or_else(|| {
                        crate::run::RunError::new("HOOK_FAILED", "The hook did not finish")
                    });
                    return Err(HookRefusal::Failed {
                        code: error.code,
                        message: error.message,
                    });
                }
            }
        }
        Ok(new)
    }
}

/// The journal of a hook's run: nothing of it is stored.
struct Unrecorded;

#[async_trait]
impl RunJournal for Unrecorded {
    async fn checkpoint(
        &self,
        _: Uuid,
        _: Uuid,
        _: &[StepRecord],
    ) -> Result<Option<bool>, StoreError> {
        Ok(Some(false))
    }

    async fn renew(&self, _: Uuid, _: Uuid) -> Result<Option<bool>, StoreError> {
        Ok(Some(false))
    }

    async fn finish(&self, _: Uuid, _: &Outcome, _: &[StepRecord]) -> Result<(), StoreError> {
        Ok(())
    }

    fn child(self: Arc<Self>, _: &[StepRecord]) -> Arc<dyn RunJournal> {
        self
    }
}
