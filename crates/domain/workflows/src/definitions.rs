//! Workflow definitions for the Admin API: list, create, update, delete,
//! publish and test runs of a draft, checked against the store (users,
//! resources) and the settings (the longest synchronous wait).

use std::sync::Arc;
use std::time::Duration;

use audit::AuditEvent;
use kernel::{FieldError, new_id};
use permissions::Principal;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::WorkflowError;
use crate::model::{Definition, ResponseMode, Trigger, WebhookAccess, WebhookMethod};
use crate::run::{Outcome, RunRecord};
use crate::runner::RunStart;
use crate::service::WorkflowService;
use crate::store::{EventTarget, NewWorkflow, WorkflowChanges, WorkflowRecord};

/// What a create or update sends.
#[derive(Debug, Clone, Default)]
pub struct WorkflowInput {
    /// The slug.
    pub slug: Option<String>,
    /// The name.
    pub name: Option<String>,
    /// Enabled.
    pub enabled: Option<bool>,
    /// The trigger.
    pub trigger: Option<Value>,
    /// The steps.
    pub steps: Option<Value>,
}

/// A webhook a role may call, for its API document.
#[derive(Debug, Clone)]
pub struct WebhookInfo {
    /// The URL segment.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// POST (else GET).
    pub post: bool,
    /// Answers with the outcome (else 202).
    pub sync: bool,
    /// Callable without a credential.
    pub public: bool,
}

impl WorkflowService {
    /// Every workflow.
    pub async fn list(&self) -> Result<Vec<WorkflowRecord>, WorkflowError> {
        Ok(self.store.workflows().await?)
    }

    /// One workflow.
    pub async fn get(&self, id: Uuid) -> Result<WorkflowRecord, WorkflowError> {
        self.store
            .workflow(id)
            .await?
            .ok_or(WorkflowError::NotFound)
    }

    /// Parses and checks a definition against the store (users, resources).
    async fn checked(&self, trigger: &Value, steps: &Value) -> Result<Definition, WorkflowError> {
        let settings = self.settings.current().await?;
        let definition = Definition::parse(trigger, steps, settings.max_sync_wait_ms())?;
        match &definition.trigger {
            Trigger::Webhook(hook) => {
                if let Some(user) = hook.execute_as
                    && !self.store.user_exists(user).await?
                {
                    return Err(FieldError::new("trigger.executeAs", "no such active user").into());
                }
            }
            Trigger::DbEvent(event) => {
                if !self.store.resource_exists(event.resource_id).await? {
                    return Err(FieldError::new("trigger.resourceId", "no such resource").into());
                }
                if let Some(user) = event.execute_as
                    && !self.store.user_exists(user).await?
                {
                    return Err(FieldError::new("trigger.executeAs", "no such active user").into());
                }
            }
            Trigger::BeforeWrite(hook) => {
                if !self.store.resource_exists(hook.resource_id).await? {
                    return Err(FieldError::new("trigger.resourceId", "no such resource").into());
                }
            }
            Trigger::Schedule(schedule) => {
                if !self.store.user_exists(schedule.execute_as).await? {
                    return Err(FieldError::new("trigger.executeAs", "no such active user").into());
                }
            }
            Trigger::Manual => {}
        }
        // A module's top level runs once, off the async workers, within its
        // step's limits: it must leave a function as its default export.
        for (field, script) in definition.scripts() {
            let (code, limits) = (script.code.clone(), script.limits());
            let checked = tokio::task::spawn_blocking(move || scripts::check(&code, limits)).await;
            match checked {
                Ok(Ok(())) => {}
                Ok(Err(message)) => return Err(FieldError::new(field, message).into()),
                Err(_) => {
                    return Err(FieldError::new(field, "could not be checked: try again").into());
                }
            }
        }
        let calls = definition.calls();
        if !calls.is_empty() {
            let slugs: Vec<String> = self
                .store
                .workflows()
                .await?
                .into_iter()
                .map(|w| w.slug)
                .collect();
            if let Some((field, slug)) = calls
                .iter()
                .find(|(_, slug)| !slugs.iter().any(|s| s == slug))
            {
                return Err(FieldError::new(
                    field.clone(),
                    format!("no workflow has the slug {slug}"),
                )
                .into());
            }
        }
        Ok(definition)
    }

    /// Creates a workflow (its draft; publish to run it).
    pub async fn create(
        &self,
        caller: &Principal,
        input: WorkflowInput,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let slug = slug(input.slug.as_deref().unwrap_or_default())?;
        let name = name(input.name.as_deref().unwrap_or(&slug))?;
        let definition = self
            .checked(
                input.trigger.as_ref().unwrap_or(&Value::Null),
                input.steps.as_ref().unwrap_or(&Value::Array(Vec::new())),
            )
            .await?;
        let id = new_id();
        let event = AuditEvent::new(caller.actor(), "workflow.create", Some(id.to_string()), ip)
            .with_details(json!({ "slug": slug }));
        Ok(self
            .store
            .create_workflow(
                NewWorkflow {
                    id,
                    slug,
                    name,
                    enabled: input.enabled.unwrap_or(true),
                    draft: definition.to_json(),
                },
                event,
            )
            .await?)
    }

    /// Changes a workflow's draft, name, slug or enabled flag.
    pub async fn update(
        &self,
        caller: &Principal,
        id: Uuid,
        input: WorkflowInput,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let current = self.get(id).await?;
        let draft = if input.trigger.is_some() || input.steps.is_some() {
            let trigger = input
                .trigger
                .unwrap_or_else(|| current.draft["trigger"].clone());
            let steps = input
                .steps
                .unwrap_or_else(|| current.draft["steps"].clone());
            Some(self.checked(&trigger, &steps).await?.to_json())
        } else {
            None
        };
        let changes = WorkflowChanges {
            slug: input.slug.as_deref().map(slug).transpose()?,
            name: input.name.as_deref().map(name).transpose()?,
            enabled: input.enabled,
            draft,
        };
        let enabled_again = input.enabled == Some(true) && !current.enabled;
        let event = AuditEvent::new(caller.actor(), "workflow.update", Some(id.to_string()), ip);
        let updated = self
            .store
            .update_workflow(id, changes, event)
            .await?
            .ok_or(WorkflowError::NotFound)?;
        // Ticks passed while disabled are not made up: the schedule starts afresh.
        if enabled_again
            && let Some(definition) = updated
                .published
                .as_ref()
                .and_then(|p| Definition::from_stored(p).ok())
            && let Some(first) = self.first_tick(&definition).await?
        {
            self.store.set_schedule(id, Some(first), None).await?;
        }
        Ok(updated)
    }

    /// Deletes a workflow, its grants and its runs.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), WorkflowError> {
        let event = AuditEvent::new(caller.actor(), "workflow.delete", Some(id.to_string()), ip);
        if self.store.delete_workflow(id, event).await? {
            Ok(())
        } else {
            Err(WorkflowError::NotFound)
        }
    }

    /// Copies the draft to the published version, checked again (the wait
    /// limit or a user may have changed since it was saved).
    pub async fn publish(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<WorkflowRecord, WorkflowError> {
        let current = self.get(id).await?;
        let definition = self
            .checked(&current.draft["trigger"], &current.draft["steps"])
            .await?;
        let target = match &definition.trigger {
            Trigger::DbEvent(event) => Some(EventTarget {
                resource_id: event.resource_id,
                events: event.events.iter().map(|e| e.as_str().to_owned()).collect(),
            }),
            _ => None,
        };
        let first_tick = self.first_tick(&definition).await?;
        let event = AuditEvent::new(caller.actor(), "workflow.publish", Some(id.to_string()), ip);
        self.store
            .publish(id, definition.to_json(), target, first_tick, event)
            .await?
            .ok_or(WorkflowError::NotFound)
    }

    /// Runs the draft synchronously in test mode with `{ query, body, meta }`
    /// (for a database-event workflow, `body` is the event), as Execute as or
    /// else the administrator testing it.
    pub async fn test(
        &self,
        caller: &Principal,
        id: Uuid,
        input: Value,
    ) -> Result<Outcome, WorkflowError> {
        let current = self.get(id).await?;
        let definition = Definition::from_stored(&current.draft)?;
        let Value::Object(mut input) = input else {
            return Err(FieldError::new("data", "must be an object { query, body, meta }").into());
        };
        let start_data = match &definition.trigger {
            Trigger::Webhook(_) => json!({
                "query": input.remove("query").unwrap_or_else(|| json!({})),
                "body": input.remove("body").unwrap_or(Value::Null),
                "meta": input.remove("meta").unwrap_or_else(|| json!({ "ip": null, "headers": {} })),
            }),
            // A database event's `start.data` ({ event, resource, old, new }),
            // a schedule's ({ scheduledAt }) or a manual input comes as the body.
            _ => input.remove("body").unwrap_or_else(|| json!({})),
        };
        let run_as = definition.trigger.execute_as().unwrap_or(caller.user_id);
        let settings = self.settings.current().await?;
        let (run, handle) = self
            .start(RunStart {
                workflow_id: current.id,
                test: true,
                definition: Arc::new(definition),
                stored: current.draft,
                start_data,
                run_as,
                caller_id: Some(caller.user_id),
                allow_private: settings.http_allow_private(),
            })
            .await?;
        let wait = Duration::from_millis(settings.max_sync_wait_ms());
        self.await_outcome(run, handle, wait, None).await
    }

    /// The published, enabled webhooks a role may call: the public ones,
    /// and those `granted` to it (every one for administrators).
    pub async fn webhooks(
        &self,
        admin: bool,
        granted: &[Uuid],
    ) -> Result<Vec<WebhookInfo>, WorkflowError> {
        let mut hooks = Vec::new();
        for record in self.store.workflows().await? {
            let Some(definition) = record
                .published
                .as_ref()
                .filter(|_| record.enabled)
                .and_then(|p| Definition::from_stored(p).ok())
            else {
                continue;
            };
            let Trigger::Webhook(hook) = definition.trigger else {
                continue;
            };
            let public = hook.access == WebhookAccess::Public;
            if public || admin || granted.contains(&record.id) {
                hooks.push(WebhookInfo {
                    slug: record.slug,
                    name: record.name,
                    post: hook.method == WebhookMethod::Post,
                    sync: hook.response == ResponseMode::Sync,
                    public,
                });
            }
        }
        Ok(hooks)
    }

    /// A workflow's runs, newest first.
    pub async fn runs(
        &self,
        id: Uuid,
        limit: u64,
        offset: u64,
    ) -> Result<Vec<RunRecord>, WorkflowError> {
        self.get(id).await?;
        Ok(self.store.runs(id, limit, offset).await?)
    }
}

fn slug(raw: &str) -> Result<String, FieldError> {
    kernel::validate::slug(raw, "slug")
}

/// A workflow's display name: 1 to 200 characters of one line.
fn name(raw: &str) -> Result<String, FieldError> {
    kernel::validate::short_text(raw, "name", NAME_MAX)
}

/// Longest workflow name, in characters.
const NAME_MAX: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_url_safe() {
        assert!(slug("order-intake-2").is_ok());
        for bad in ["", "Order", "a b", "-x", "a/b", &"a".repeat(65)] {
            assert!(slug(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_one_trimmed_line_of_at_most_200_characters() {
        assert_eq!(
            name("  Order intake ").ok().as_deref(),
            Some("Order intake")
        );
        assert!(name(&"é".repeat(200)).is_ok());
        for bad in ["", "   ", "a\tb", "a\nb", &"a".repeat(201)] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
    }
}
