//! What DataViews and dashboards ask of their store.

use std::sync::Arc;

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use data::{Context, DataStore, Found, Table};
use kernel::StoreError;
use permissions::Scope;
use serde_json::Value;
use uuid::Uuid;

use crate::definition::Definition;
use crate::query::ViewQuery;

/// A stored DataView.
#[derive(Debug, Clone, PartialEq)]
pub struct DataViewRecord {
    /// Its id.
    pub id: Uuid,
    /// Its address under `/api/views/`.
    pub slug: String,
    /// Its display name.
    pub name: String,
    /// The definition being edited.
    pub draft: Value,
    /// The definition served; `None` until published.
    pub published: Option<Value>,
    /// When it was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A stored dashboard.
#[derive(Debug, Clone, PartialEq)]
pub struct DashboardRecord {
    /// Its id.
    pub id: Uuid,
    /// Its address under `/api/dashboards/` and `/admin/dashboards/`.
    pub slug: String,
    /// Its display name.
    pub name: String,
    /// Seconds between refreshes of its page; `None`: no refresh.
    pub refresh_seconds: Option<u32>,
    /// The widgets, as stored.
    pub widgets: Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A published DataView as served, prepared once per catalog load: its
/// snapshot parsed and checked against its source, with its grants.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedView {
    /// Its id.
    pub id: Uuid,
    /// Its address.
    pub slug: String,
    /// Its display name.
    pub name: String,
    /// The published snapshot.
    pub definition: Definition,
    /// Its source table, from the same catalog.
    pub source: Arc<Table>,
    /// Its output columns and their types on that source.
    pub shape: Table,
    /// Its read grants (filters over the output columns).
    pub scopes: Vec<Scope>,
}

/// Which published view.
#[derive(Debug, Clone, Copy)]
pub enum ViewKey<'a> {
    /// By slug (`/api/views/{slug}`).
    Slug(&'a str),
    /// By id (a dashboard's widget).
    Id(Uuid),
}

/// What a view read ran and found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewAnswer {
    /// The statement, with `$n` placeholders.
    pub sql: String,
    /// The values bound to them.
    pub params: Vec<Value>,
    /// The rows (a JSON array's text) and the total.
    pub found: Found,
}

/// Persistence of DataViews and dashboards; reads share the Data API's
/// catalog and statements.
#[async_trait]
pub trait ViewStore: DataStore {
    /// Every DataView, by name.
    async fn dataviews(&self) -> Result<Vec<DataViewRecord>, StoreError>;
    /// One DataView.
    async fn dataview(&self, id: Uuid) -> Result<Option<DataViewRecord>, StoreError>;
    /// Inserts a DataView, or with `existing` changes its slug, name and
    /// draft (CONFLICT on a taken slug, NOT_FOUND on an unknown id).
    async fn save_dataview(
        &self,
        record: &DataViewRecord,
        existing: bool,
        event: AuditEvent,
    ) -> Result<DataViewRecord, StoreError>;
    /// Deletes a DataView with its grants; false when unknown.
    async fn delete_dataview(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
    /// Copies the draft to the published snapshot.
    async fn publish_dataview(
        &self,
        id: Uuid,
        at: DateTime<Utc>,
        event: AuditEvent,
    ) -> Result<Option<DataViewRecord>, StoreError>;
    /// A published view (cached per instance with the catalog and checked
    /// by version like the tables); `None` when unknown, unpublished, or its
    /// source is gone or no longer fits it.
    async fn published_view(
        &self,
        key: ViewKey<'_>,
    ) -> Result<Option<Arc<PublishedView>>, StoreError>;
    /// Every published view that serves, by slug.
    async fn published_views(&self) -> Result<Vec<Arc<PublishedView>>, StoreError>;
    /// Runs a view read in one statement, first checking that
    /// `context.versions` are current ([`StoreError::Stale`] if not).
    async fn run_view(
        &self,
        query: &ViewQuery<'_>,
        context: &Context,
    ) -> Result<ViewAnswer, StoreError>;
    /// Every dashboard, by name.
    async fn dashboards(&self) -> Result<Vec<DashboardRecord>, StoreError>;
    /// One dashboard, by id or by slug.
    async fn dashboard(
        &self,
        id: Option<Uuid>,
        slug: Option<&str>,
    ) -> Result<Option<DashboardRecord>, StoreError>;
    /// Inserts or (with `existing`) changes a dashboard (CONFLICT on a taken
    /// slug, NOT_FOUND on an unknown id).
    async fn save_dashboard(
        &self,
        record: &DashboardRecord,
        existing: bool,
        event: AuditEvent,
    ) -> Result<DashboardRecord, StoreError>;
    /// Deletes a dashboard; false when unknown.
    async fn delete_dashboard(&self, id: Uuid, event: AuditEvent) -> Result<bool, StoreError>;
}
