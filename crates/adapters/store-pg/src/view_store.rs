//! DataViews and dashboards: their records in `svc.dataviews` and
//! `svc.dashboards`; reads go through the Data API's catalog and builder.

use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use data::Context;
use kernel::StoreError;
use sea_orm::{FromQueryResult, QueryResult};
use serde_json::Value as Json;
use uuid::Uuid;
use views::query::ViewQuery;
use views::store::{
    DashboardRecord, DataViewRecord, PublishedView, ViewAnswer, ViewKey, ViewStore,
};

use crate::query::{Begin, Query};
use crate::{PgStore, commit_with_audit, execute, rows, stmt};

const VIEW_COLUMNS: &str = "id, slug, name, draft, published, published_at, created_at, updated_at";
const DASHBOARD_COLUMNS: &str = "id, slug, name, refresh_seconds, widgets, created_at, updated_at";

/// A row of [`VIEW_COLUMNS`].
#[derive(FromQueryResult)]
struct DataViewRow {
    id: Uuid,
    slug: String,
    name: String,
    draft: Json,
    published: Option<Json>,
    published_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn dataview(row: &QueryResult) -> Result<DataViewRecord, StoreError> {
    let r = rows::row::<DataViewRow>(row)?;
    Ok(DataViewRecord {
        id: r.id,
        slug: r.slug,
        name: r.name,
        draft: r.draft,
        published: r.published,
        published_at: r.published_at,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

/// A row of [`DASHBOARD_COLUMNS`].
#[derive(FromQueryResult)]
struct DashboardRow {
    id: Uuid,
    slug: String,
    name: String,
    refresh_seconds: Option<i32>,
    widgets: Json,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn dashboard(row: &QueryResult) -> Result<DashboardRecord, StoreError> {
    let r = rows::row::<DashboardRow>(row)?;
    Ok(DashboardRecord {
        id: r.id,
        slug: r.slug,
        name: r.name,
        refresh_seconds: r.refresh_seconds.and_then(|n| u32::try_from(n).ok()),
        widgets: r.widgets,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

impl PgStore {
    /// Runs one statement answering the changed row, commits it with its
    /// audit entry (dropping this instance's catalog when `catalog`), and
    /// reads the row with `read`; `None` when no row matched.
    async fn change<T>(
        &self,
        (sql, values): (String, Vec<sea_orm::Value>),
        event: AuditEvent,
        catalog: bool,
        read: fn(&QueryResult) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let txn = self.db.open_txn().await?;
        let Some(row) = txn.fetch_optional(stmt(&sql, values)).await? else {
            return Ok(None);
        };
        let changed = read(&row)?;
        if catalog {
            self.commit_catalog_change(txn, event).await?;
        } else {
            commit_with_audit(txn, event, self.now()).await?;
        }
        Ok(Some(changed))
    }

    /// Runs `sql` deleting the row with this id, with its audit entry.
    async fn delete_with_audit(
        &self,
        sql: &str,
        id: Uuid,
        event: AuditEvent,
        catalog: bool,
    ) -> Result<bool, StoreError> {
        let txn = self.db.open_txn().await?;
        if execute(&txn, sql, [id.into()]).await? == 0 {
            return Ok(false);
        }
        if catalog {
            self.commit_catalog_change(txn, event).await?;
        } else {
            commit_with_audit(txn, event, self.now()).await?;
        }
        Ok(true)
    }

    async fn all<T>(
        &self,
        sql: &str,
        read: fn(&QueryResult) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.db.fetch_all(stmt(sql, [])).await?;
        rows.iter().map(read).collect()
    }
}

#[async_trait]
impl ViewStore for PgStore {
    async fn dataviews(&self) -> Result<Vec<DataViewRecord>, StoreError> {
        self.all(
            &format!("SELECT {VIEW_COLUMNS} FROM svc.dataviews ORDER BY name, id"),
            dataview,
        )
        .await
    }

    async fn dataview(&self, id: Uuid) -> Result<Option<DataViewRecord>, StoreError> {
        let sql = format!("SELECT {VIEW_COLUMNS} FROM svc.dataviews WHERE id = $1");
        self.db
            .fetch_optional(stmt(&sql, [id.into()]))
            .await?
            .as_ref()
            .map(dataview)
            .transpose()
    }

    async fn save_dataview(
        &self,
        record: &DataViewRecord,
        existing: bool,
        event: AuditEvent,
    ) -> Result<DataViewRecord, StoreError> {
        let sql = if existing {
            format!(
                "UPDATE svc.dataviews SET slug = $2, name = $3, draft = $4, created_at = $5, updated_at = $6 \
                 WHERE id = $1 RETURNING {VIEW_COLUMNS}"
            )
        } else {
            format!(
                "INSERT INTO svc.dataviews (id, slug, name, draft, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING {VIEW_COLUMNS}"
            )
        };
        let values = vec![
            record.id.into(),
            record.slug.clone().into(),
            record.name.clone().into(),
            record.draft.clone().into(),
            record.created_at.into(),
            record.updated_at.into(),
        ];
        // A slug change moves what is served: the catalog changes.
        self.change((sql, values), event, existing, dataview)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn delete_dataview(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        self.delete_with_audit("DELETE FROM svc.dataviews WHERE id = $1", id, event, true)
            .await
    }

    async fn publish_dataview(
        &self,
        id: Uuid,
        at: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<DataViewRecord>, StoreError> {
        let sql = format!(
            "UPDATE svc.dataviews SET published = draft, published_at = $2, updated_at = $2 \
             WHERE id = $1 RETURNING {VIEW_COLUMNS}"
        );
        self.change((sql, vec![id.into(), at.into()]), event, true, dataview)
            .await
    }

    async fn published_view(
        &self,
        key: ViewKey<'_>,
    ) -> Result<Option<Arc<PublishedView>>, StoreError> {
        self.published(key).await
    }

    async fn published_views(&self) -> Result<Vec<Arc<PublishedView>>, StoreError> {
        self.all_published().await
    }

    async fn run_view(
        &self,
        query: &ViewQuery<'_>,
        context: &Context,
    ) -> Result<ViewAnswer, StoreError> {
        self.view_rows(query, context).await
    }

    async fn dashboards(&self) -> Result<Vec<DashboardRecord>, StoreError> {
        self.all(
            &format!("SELECT {DASHBOARD_COLUMNS} FROM svc.dashboards ORDER BY name, id"),
            dashboard,
        )
        .await
    }

    async fn dashboard(
        &self,
        id: Option<Uuid>,
        slug: Option<&str>,
    ) -> Result<Option<DashboardRecord>, StoreError> {
        let sql = format!(
            "SELECT {DASHBOARD_COLUMNS} FROM svc.dashboards \
             WHERE ($1::uuid IS NULL OR id = $1) AND ($2::text IS NULL OR slug = $2)"
        );
        self.db
            .fetch_optional(stmt(&sql, [id.into(), slug.map(str::to_owned).into()]))
            .await?
            .as_ref()
            .map(dashboard)
            .transpose()
    }

    async fn save_dashboard(
        &self,
        record: &DashboardRecord,
        existing: bool,
        event: AuditEvent,
    ) -> Result<DashboardRecord, StoreError> {
        let sql = if existing {
            format!(
                "UPDATE svc.dashboards SET slug = $2, name = $3, refresh_seconds = $4, widgets = $5, \
                 created_at = $6, updated_at = $7 WHERE id = $1 RETURNING {DASHBOARD_COLUMNS}"
            )
        } else {
            format!(
                "INSERT INTO svc.dashboards ({DASHBOARD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 RETURNING {DASHBOARD_COLUMNS}"
            )
        };
        let values = vec![
            record.id.into(),
            record.slug.clone().into(),
            record.name.clone().into(),
            record
                .refresh_seconds
                .and_then(|n| i32::try_from(n).ok())
                .into(),
            record.widgets.clone().into(),
            record.created_at.into(),
            record.updated_at.into(),
        ];
        self.change((sql, values), event, false, dashboard)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn delete_dashboard(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError> {
        self.delete_with_audit("DELETE FROM svc.dashboards WHERE id = $1", id, event, false)
            .await
    }
}
