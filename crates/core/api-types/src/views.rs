//! DataViews and dashboards.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

/// An output column of a DataView: a plain `column` (grouped), an `agg`
/// (count, sum, avg, min, max) of a column, or a `bucket` (hour, day, week,
/// month, year) of a date or timestamp column, cut in the caller's zone.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DataViewColumn {
    /// Its name in the answer (letters, digits, `_`).
    pub name: String,
    /// The source column (optional only for `count`).
    pub column: Option<String>,
    /// The aggregate.
    pub agg: Option<String>,
    /// The time bucket.
    pub bucket: Option<String>,
}

/// Body of `POST` and `PATCH /admin/api/dataviews`: on PATCH, the fields
/// given replace the draft's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataViewRequest {
    /// Address under `/api/views/` (lower-case letters, digits, `-`).
    pub slug: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The source table, `schema.table`.
    pub source: Option<String>,
    /// Output columns (at least one).
    pub columns: Option<Vec<DataViewColumn>>,
    /// Rows of the source read, in the filter language (`$USER`, `$PERIOD` allowed).
    pub filter: Option<Value>,
    /// Output columns to sort by; `-name` for descending.
    pub sort: Option<Vec<String>>,
    /// Rows the view yields at most.
    pub limit: Option<u32>,
}

/// A DataView; `source`, `columns`, `filter`, `sort` and `limit` are the draft.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataView {
    /// DataView id.
    pub id: Uuid,
    /// Address under `/api/views/`.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// The source table, `schema.table`.
    pub source: Value,
    /// Output columns.
    #[schema(value_type = Vec<DataViewColumn>)]
    pub columns: Value,
    /// Rows of the source read.
    pub filter: Value,
    /// Output columns to sort by.
    #[schema(value_type = Vec<String>)]
    pub sort: Value,
    /// Rows the view yields at most.
    #[schema(value_type = Option<u32>)]
    pub limit: Value,
    /// Whether a published snapshot is served.
    pub published: bool,
    /// When the draft was last published.
    pub published_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A draft run by an administrator.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataViewPreview {
    /// The statement that ran, with `$n` placeholders.
    pub sql: String,
    /// The values bound to the placeholders, in order.
    pub params: Vec<Value>,
    /// The rows it answered.
    pub rows: Value,
}

/// A widget's place on the 12-column grid.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WidgetLayout {
    /// First column, 0 to 11.
    pub col: u32,
    /// First row, from 0.
    pub row: u32,
    /// Width in columns, 1 to 12 (`col + w` at most 12).
    pub w: u32,
    /// Height in rows, 1 to 24.
    pub h: u32,
}

/// A dashboard widget.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardWidget {
    /// Id, unique on the dashboard.
    pub id: String,
    /// number, line, bar, pie or table.
    #[serde(rename = "type")]
    pub kind: String,
    /// Heading.
    pub title: Option<String>,
    /// The DataView shown.
    pub data_view_id: Uuid,
    /// Output column along the axis (line, bar; a pie's labels).
    pub x: Option<String>,
    /// Output columns drawn (number and pie: exactly one; a table: the columns shown).
    pub y: Option<Vec<String>>,
    /// Place on the grid; omitted: full width, stacked.
    pub layout: Option<WidgetLayout>,
}

/// Body of `POST` and `PATCH /admin/api/dashboards`: on PATCH, the fields given replace.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardRequest {
    /// Address under `/api/dashboards/` and `/admin/dashboards/`.
    pub slug: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Seconds between refreshes of the page (5 to 86400); omitted: none.
    pub refresh_seconds: Option<u32>,
    /// The widgets.
    pub widgets: Option<Vec<DashboardWidget>>,
}

/// A dashboard.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    /// Dashboard id.
    pub id: Uuid,
    /// Address under `/api/dashboards/` and `/admin/dashboards/`.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Seconds between refreshes of the page.
    pub refresh_seconds: Option<u32>,
    /// The widgets.
    #[schema(value_type = Vec<DashboardWidget>)]
    pub widgets: Value,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A dashboard as the caller sees it: each widget with `rows`, or with
/// `error` when the caller may not read its view.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedDashboard {
    /// Dashboard id.
    pub id: Uuid,
    /// Its address.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Seconds between refreshes of the page.
    pub refresh_seconds: Option<u32>,
    /// The caller's time zone, where buckets are cut.
    pub zone: String,
    /// The widgets, each with `rows` (the view's output) or `error` ({ code, message }).
    #[schema(value_type = Vec<Object>)]
    pub widgets: Vec<Value>,
}

/// A dashboard in a list for readers.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardSummary {
    /// Dashboard id.
    pub id: Uuid,
    /// Its address.
    pub slug: String,
    /// Display name.
    pub name: String,
}
