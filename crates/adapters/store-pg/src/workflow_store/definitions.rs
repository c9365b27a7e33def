//! Workflow definitions: created, changed, published, and found by a
//! webhook call's slug.

use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use serde_json::Value as Json;
use uuid::Uuid;
use workflows::store::{
    DefinitionStore, EventTarget, NewWorkflow, PublishedWorkflow, WebhookLookup, WebhookTarget,
    WorkflowChanges, WorkflowRecord,
};

use super::WORKFLOW_COLUMNS;
use super::rows::{WebhookRow, workflow};
use crate::query::{Begin, Query};
use crate::rows as typed;
use crate::{PgStore, commit_with_audit, execute, exists, stmt, versions_of};

/// The workflow of a webhook call (`$1` slug) with the versions, taking a
/// call of `$3` (the address's key) from the public rate limit when the
/// workflow's access is public (`$4`; `$5` when it names none) and it is
/// called with its method (`$2`; `$6` when it names none): under the row
/// lock of `ON CONFLICT`, against the limit stored in `svc.settings` under
/// `$7` (`$8` when not stored), so no two instances pass it together.
/// Windows that ended are cleared by the worker. The defaults come from the
/// workflow model and the settings registry.
const WEBHOOK_SQL: &str = "WITH w AS ( \
        SELECT w.id, w.published, \
        ARRAY(SELECT g.role_id FROM svc.grants g WHERE g.workflow_id = w.id AND g.action = 'invoke') AS roles, \
        coalesce(w.published #>> '{trigger,access}', $5) = $4 \
          AND coalesce(w.published #>> '{trigger,method}', $6) = $2 AS counted \
        FROM svc.workflows w WHERE w.slug = $1 AND w.enabled AND w.published IS NOT NULL), \
    lim AS (SELECT coalesce((SELECT (s.value #>> '{}')::bigint FROM svc.settings s \
        WHERE s.key = $7), $8) AS n), \
    taken AS (SELECT svc.take_rate($3, (SELECT n FROM lim)) AS wait FROM w WHERE w.counted) \
    SELECT v.auth AS v_auth, v.catalog AS v_catalog, v.settings AS v_settings, \
        w.id, w.published, w.roles, coalesce(w.counted, false) AS counted, \
        coalesce((SELECT wait FROM taken), 0) AS wait \
    FROM svc.cache_version v LEFT JOIN w ON true";

#[async_trait]
impl DefinitionStore for PgStore {
    async fn workflows(&self) -> Result<Vec<WorkflowRecord>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM svc.workflows ORDER BY name, id");
        let rows = self.db.fetch_all(stmt(&sql, [])).await?;
        rows.iter().map(workflow).collect()
    }

    async fn workflow(&self, id: Uuid) -> Result<Option<WorkflowRecord>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_COLUMNS} FROM svc.workflows WHERE id = $1");
        let row = self.db.fetch_optional(stmt(&sql, [id.into()])).await?;
        row.as_ref().map(workflow).transpose()
    }

    async fn create_workflow(
        &self,
        new: NewWorkflow,
        event: AuditEvent,
    ) -> Result<WorkflowRecord, StoreError> {
        let txn = self.db.open_txn().await?;
        let sql = format!(
            "INSERT INTO svc.workflows (id, slug, name, enabled, draft) VALUES ($1, $2, $3, $4, $5) RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .fetch_optional(stmt(
                &sql,
                [
                    new.id.into(),
                    new.slug.into(),
                    new.name.into(),
                    new.enabled.into(),
                    new.draft.into(),
                ],
            ))
            .await?
            .ok_or(StoreError::NotFound)?;
        let created = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(created)
    }

    async fn update_workflow(
        &self,
        id: Uuid,
        changes: WorkflowChanges,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError> {
        let txn = self.db.open_txn().await?;
        let sql = format!(
            "UPDATE svc.workflows SET slug = coalesce($2, slug), name = coalesce($3, name), \
             enabled = coalesce($4, enabled), draft = coalesce($5, draft), updated_at = now() \
             WHERE id = $1 RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .fetch_optional(stmt(
                &sql,
                [
                    id.into(),
                    changes.slug.into(),
                    changes.name.into(),
                    changes.enabled.into(),
                    changes.draft.into(),
                ],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let updated = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(Some(updated))
    }

    async fn delete_workflow(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        if execute(&txn, "DELETE FROM svc.workflows WHERE id = $1", [id.into()]).await? == 0 {
            return Ok(false);
        }
        self.commit_catalog_change(txn, event).await?;
        Ok(true)
    }

    async fn publish(
        &self,
        id: Uuid,
        snapshot: Json,
        target: Option<EventTarget>,
        schedule_next_at: Option<chrono::DateTime<chrono::Utc>>,
        event: AuditEvent,
    ) -> Result<Option<WorkflowRecord>, StoreError> {
        let txn = self.db.open_txn().await?;
        if let Some(target) = &target {
            Self::capture_events(&txn, target.resource_id).await?;
        }
        let (resource, events) = match target {
            Some(t) => (Some(t.resource_id), t.events),
            None => (None, Vec::new()),
        };
        let sql = format!(
            "UPDATE svc.workflows SET published = $2, published_at = now(), event_resource_id = $3, \
             event_kinds = $4, schedule_next_at = $5, updated_at = now() WHERE id = $1 RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = txn
            .fetch_optional(stmt(
                &sql,
                [
                    id.into(),
                    snapshot.into(),
                    resource.into(),
                    events.into(),
                    schedule_next_at.into(),
                ],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let published = workflow(&row)?;
        commit_with_audit(txn, event, self.now()).await?;
        Ok(Some(published))
    }

    async fn published_workflow(
        &self,
        slug: &str,
    ) -> Result<Option<PublishedWorkflow>, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT id, published FROM svc.workflows WHERE slug = $1 AND enabled AND published IS NOT NULL",
                [slug.into()],
            )).await?;
        row.map(|row| {
            Ok(PublishedWorkflow {
                id: typed::column(&row, "id")?,
                definition: typed::column(&row, "published")?,
            })
        })
        .transpose()
    }

    async fn user_exists(&self, id: Uuid) -> Result<bool, StoreError> {
        let sql = "SELECT 1 AS one FROM svc.users WHERE id = $1 AND active";
        exists(&self.db, sql, [id.into()]).await
    }

    async fn resource_exists(&self, id: Uuid) -> Result<bool, StoreError> {
        let sql = "SELECT 1 AS one FROM svc.resources WHERE id = $1";
        exists(&self.db, sql, [id.into()]).await
    }

    async fn webhook(&self, call: WebhookLookup<'_>) -> Result<Option<WebhookTarget>, StoreError> {
        let row = self
            .lane_row(
                WEBHOOK_SQL,
                [
                    call.slug.into(),
                    call.method.into(),
                    call.rate_key.into(),
                    call.public_access.into(),
                    call.default_access.into(),
                    call.default_method.into(),
                    call.rate_limit_key.into(),
                    call.rate_limit_default.into(),
                ],
            )
            .await?
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        self.seen.observe(versions_of(&row, "v_")?);
        if typed::column::<Option<Uuid>>(&row, "id")?.is_none() {
            return Ok(None);
        }
        let found = typed::row::<WebhookRow>(&row)?;
        Ok(Some(WebhookTarget {
            workflow_id: found.id,
            definition: found.published,
            invoke_roles: found.roles,
            retry_after: (found.wait > 0).then(|| u64::try_from(found.wait).unwrap_or(1)),
        }))
    }
}
