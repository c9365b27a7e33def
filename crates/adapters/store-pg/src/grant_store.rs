use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use kernel::{FieldError, StoreError};
use permissions::{Action, Grant, GrantQuery, GrantStore, ResourceTarget};
use sea_orm::{FromQueryResult, QueryResult, Value};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::query::{Begin, Query};
use crate::{PgStore, execute, exists, rows, stmt};

/// The columns a grant is read back by: a function's grant names its
/// function as its resource.
const GRANT_COLUMNS: &str = "id, role_id, coalesce(resource_id, function_id) AS resource_id, \
     workflow_id, data_view_id, action, filter, columns, created_at";

/// A row of [`GRANT_COLUMNS`].
#[derive(FromQueryResult)]
struct GrantRow {
    id: Uuid,
    role_id: Uuid,
    resource_id: Option<Uuid>,
    workflow_id: Option<Uuid>,
    data_view_id: Option<Uuid>,
    action: String,
    filter: Option<Json>,
    columns: Option<Vec<String>>,
    created_at: DateTime<Utc>,
}

fn grant(row: &QueryResult) -> Result<Grant, StoreError> {
    let r = rows::row::<GrantRow>(row)?;
    Ok(Grant {
        id: r.id,
        role_id: r.role_id,
        resource_id: r.resource_id,
        workflow_id: r.workflow_id,
        data_view_id: r.data_view_id,
        action: Action::parse(&r.action)
            .ok_or_else(|| StoreError::Internal(format!("stored action {}", r.action)))?,
        filter: r.filter,
        columns: r.columns,
        created_at: r.created_at,
    })
}

#[async_trait]
impl GrantStore for PgStore {
    async fn grants(&self, query: GrantQuery) -> Result<Vec<Grant>, StoreError> {
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM svc.grants WHERE ($1::uuid IS NULL OR role_id = $1) \
             AND ($2::uuid IS NULL OR coalesce(resource_id, function_id) = $2) ORDER BY created_at, id"
        );
        let rows = self
            .db
            .fetch_all(stmt(&sql, [query.role_id.into(), query.resource_id.into()]))
            .await?;
        rows.iter().map(grant).collect()
    }

    async fn resource_target(
        &self,
        resource_id: Uuid,
    ) -> Result<Option<ResourceTarget>, StoreError> {
        let sql = "SELECT coalesce((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a \
                   WHERE a.attrelid = to_regclass(format('%I.%I', r.schema_name, r.table_name)) AND a.attnum > 0 AND NOT a.attisdropped), '{}') AS columns \
                   FROM svc.resources r WHERE r.id = $1 \
                   UNION ALL SELECT NULL FROM svc.functions f WHERE f.id = $1";
        let row = self
            .db
            .fetch_optional(stmt(sql, [resource_id.into()]))
            .await?;
        row.map(|r| {
            Ok(match rows::column::<Option<Vec<String>>>(&r, "columns")? {
                Some(columns) => ResourceTarget::Table(columns),
                None => ResourceTarget::Function,
            })
        })
        .transpose()
    }

    async fn data_view_columns(&self, view_id: Uuid) -> Result<Option<Vec<String>>, StoreError> {
        let sql = "SELECT coalesce((SELECT array_agg(c ->> 'name') FROM jsonb_array_elements(coalesce(v.published, v.draft) -> 'columns') AS c), '{}') AS columns \
                   FROM svc.dataviews v WHERE v.id = $1";
        let row = self.db.fetch_optional(stmt(sql, [view_id.into()])).await?;
        row.map(|r| rows::column(&r, "columns")).transpose()
    }

    async fn create_grant(&self, new: Grant, event: AuditEvent) -> Result<Grant, StoreError> {
        let txn = self.db.open_txn().await?;
        if !exists(
            &txn,
            "SELECT 1 AS one FROM svc.roles WHERE id = $1",
            [new.role_id.into()],
        )
        .await?
        {
            return Err(FieldError::new("roleId", "no such role").into());
        }
        if let Some(workflow) = new.workflow_id
            && !exists(
                &txn,
                "SELECT 1 AS one FROM svc.workflows WHERE id = $1",
                [workflow.into()],
            )
            .await?
        {
            return Err(StoreError::NotFound);
        }
        // A resource id names a table's resource or a function.
        let sql = format!(
            "INSERT INTO svc.grants (id, role_id, resource_id, function_id, workflow_id, data_view_id, \
             action, filter, columns, created_at) \
             SELECT $1, $2, (SELECT id FROM svc.resources WHERE id = $3), \
             (SELECT id FROM svc.functions WHERE id = $3), $4, $5, $6, $7, $8, $9 \
             RETURNING {GRANT_COLUMNS}"
        );
        let values: [Value; 9] = [
            new.id.into(),
            new.role_id.into(),
            new.resource_id.into(),
            new.workflow_id.into(),
            new.data_view_id.into(),
            new.action.as_str().into(),
            new.filter.into(),
            new.columns.into(),
            new.created_at.into(),
        ];
        let row = txn
            .fetch_optional(stmt(&sql, values))
            .await?
            .ok_or(StoreError::NotFound)?;
        let created = grant(&row)?;
        self.commit_catalog_change(txn, event).await?;
        Ok(created)
    }

    async fn delete_grant(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        if execute(&txn, "DELETE FROM svc.grants WHERE id = $1", [id.into()]).await? == 0 {
            return Ok(false);
        }
        self.commit_catalog_change(txn, event).await?;
        Ok(true)
    }
}
