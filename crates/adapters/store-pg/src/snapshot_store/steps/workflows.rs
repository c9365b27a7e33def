//! A snapshot's workflows: names turned into ids, checked as a saved
//! definition is, secrets kept.

use crate::db::Txn;
use kernel::{StoreError, new_id};
use serde_json::Value as Json;
use snapshot::Workflow;

use snapshot::at;

use super::{Memo, RESOURCE_ID, USER_ID, id_of, settings};
use crate::query::Query;
use crate::{PgStore, execute, rows, stmt};

/// Deletes a workflow by slug (`$1`).
pub(super) const DROP: &str = "DELETE FROM svc.workflows WHERE slug = $1";

/// A `{ trigger, steps }` of a snapshot with ids for names, checked as a
/// workflow definition.
async fn definition_ids(txn: &Txn, definition: &Json, path: &str) -> Result<Json, StoreError> {
    let mut definition = definition.clone();
    if let Some(trigger) = definition.get_mut("trigger").and_then(Json::as_object_mut) {
        if let Some(email) = trigger
            .get("executeAs")
            .and_then(Json::as_str)
            .map(str::to_owned)
        {
            let id = id_of(txn, USER_ID, &email, &format!("{path}.trigger.executeAs")).await?;
            trigger.insert("executeAs".into(), Json::String(id.to_string()));
        }
        if let Some(resource) = trigger.remove("resource") {
            let name = resource.as_str().unwrap_or_default();
            let id = id_of(txn, RESOURCE_ID, name, &format!("{path}.trigger.resource")).await?;
            trigger.insert("resourceId".into(), Json::String(id.to_string()));
        }
    }
    Ok(definition)
}

/// Creates the workflow (its slug and name checked by the plan), or
/// (applying) replaces the one of that slug; its definitions are checked
/// here, with names turned into ids;
/// secrets exported as `[REDACTED]` keep the values stored.
pub(super) async fn put(
    store: &PgStore,
    txn: &Txn,
    workflow: &Workflow,
    path: &str,
    dry: bool,
    memo: &Memo,
) -> Result<(), StoreError> {
    let (slug, name) = (workflow.slug.clone(), workflow.name.clone());
    let settings = settings::current(txn, memo).await?;
    let max_wait = settings
        .value("workflows.max_sync_wait_ms")
        .as_u64()
        .unwrap_or(u64::MAX);
    // A secret exported as [REDACTED] keeps the value stored here.
    let stored = txn
        .fetch_optional(stmt(
            "SELECT draft, published FROM svc.workflows WHERE slug = $1",
            [slug.clone().into()],
        ))
        .await?;
    let stored_of = |column: &str| -> Option<Json> {
        stored
            .as_ref()
            .and_then(|row| rows::column::<Option<Json>>(row, column).ok().flatten())
    };
    let (stored_draft, stored_published) = (stored_of("draft"), stored_of("published"));
    let draft_path = format!("{path}.draft");
    let mut desired_draft = workflow.draft.clone();
    workflows::restore_secrets(
        &mut desired_draft,
        stored_draft.as_ref().or(stored_published.as_ref()),
        &draft_path,
    )?;
    let draft = definition_ids(txn, &desired_draft, &draft_path).await?;
    workflows::model::Definition::parse(&draft["trigger"], &draft["steps"], max_wait)
        .map_err(|e| at(&draft_path, e))?;
    let mut target = None;
    let mut first_tick = None;
    let published = match &workflow.published {
        None => None,
        Some(p) => {
            let published_path = format!("{path}.published");
            let mut p = p.clone();
            workflows::restore_secrets(
                &mut p,
                stored_published.as_ref().or(stored_draft.as_ref()),
                &published_path,
            )?;
            let p = definition_ids(txn, &p, &published_path).await?;
            let parsed = workflows::model::Definition::parse(&p["trigger"], &p["steps"], max_wait)
                .map_err(|e| at(&published_path, e))?;
            if let workflows::model::Trigger::DbEvent(event) = &parsed.trigger {
                let kinds: Vec<String> =
                    event.events.iter().map(|k| k.as_str().to_owned()).collect();
                target = Some((event.resource_id, kinds));
            }
            if let workflows::model::Trigger::Schedule(schedule) = &parsed.trigger {
                let system = settings
                    .system_timezone()
                    .and_then(|zone| zone.parse().ok())
                    .unwrap_or(chrono_tz::Tz::UTC);
                first_tick = schedule
                    .ticks_after(store.now(), schedule.zone(system), 1)
                    .into_iter()
                    .next();
            }
            Some(p)
        }
    };
    if let Some((resource, _)) = &target
        && !dry
    {
        PgStore::capture_events(txn, *resource).await?;
    }
    let (resource, kinds) = target.map_or((None, Vec::new()), |(r, k)| (Some(r), k));
    let on_taken = if dry { "DO NOTHING" } else { WORKFLOW_UPDATE };
    execute(
        txn,
        &format!("INSERT INTO svc.workflows (id, slug, name, enabled, draft, published, published_at, event_resource_id, event_kinds, schedule_next_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $6::jsonb IS NULL THEN NULL ELSE $10 END, $7, $8, $9, $10, $10) \
         ON CONFLICT (slug) {on_taken}"),
        vec![new_id().into(), slug.into(), name.into(), workflow.enabled.into(), draft.into(), published.into(), resource.into(), kinds.into(), first_tick.into(), store.now().into()],
    )
    .await?;
    Ok(())
}

/// A stored workflow replaced by the snapshot's.
const WORKFLOW_UPDATE: &str = "DO UPDATE SET name = EXCLUDED.name, enabled = EXCLUDED.enabled, draft = EXCLUDED.draft, \
         published = EXCLUDED.published, \
         published_at = CASE WHEN svc.workflows.published IS NOT DISTINCT FROM EXCLUDED.published THEN svc.workflows.published_at ELSE EXCLUDED.published_at END, \
         event_resource_id = EXCLUDED.event_resource_id, event_kinds = EXCLUDED.event_kinds, \
         schedule_next_at = CASE WHEN EXCLUDED.schedule_next_at IS NULL THEN NULL \
           WHEN svc.workflows.published IS NOT DISTINCT FROM EXCLUDED.published \
             THEN coalesce(svc.workflows.schedule_next_at, EXCLUDED.schedule_next_at) \
           ELSE EXCLUDED.schedule_next_at END, updated_at = EXCLUDED.updated_at";
