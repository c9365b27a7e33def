//! Dashboards: their administration (widgets checked against the columns
//! of their DataViews) and a dashboard as one caller sees it, each widget
//! read under that caller's grants.

use data::{DataError, DataRequest};
use futures_util::future::join_all;
use kernel::{FieldError, StoreError, new_id};
use permissions::{Access, Action, Plane, Principal, zone};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::dashboard::{Widget, parse_widgets};
use crate::error::ViewError;
use crate::service::{ViewService, found, patched, slug_and_name};
use crate::store::{DashboardRecord, ViewKey};
use data::ListParams;

/// A widget with its rows, or why the caller sees none.
#[derive(Debug)]
pub struct ResolvedWidget {
    /// The widget.
    pub widget: Widget,
    /// Its view's rows as a JSON array's text, or the refusal.
    pub rows: Result<String, DataError>,
}

/// A dashboard as one caller sees it.
#[derive(Debug)]
pub struct ResolvedDashboard {
    /// The dashboard.
    pub record: DashboardRecord,
    /// The caller's time zone, where buckets are cut.
    pub zone: String,
    /// Its widgets, in order.
    pub widgets: Vec<ResolvedWidget>,
}

impl ViewService {
    /// Every dashboard.
    pub async fn dashboards(&self) -> Result<Vec<DashboardRecord>, ViewError> {
        Ok(self.store.dashboards().await?)
    }

    /// One dashboard.
    pub async fn dashboard(&self, id: Uuid) -> Result<DashboardRecord, ViewError> {
        self.store
            .dashboard(Some(id), None)
            .await?
            .ok_or(ViewError::Store(StoreError::NotFound))
    }

    /// Creates a dashboard from `body` (`slug`, `name`, `refreshSeconds`, `widgets`).
    pub async fn create_dashboard(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DashboardRecord, ViewError> {
        let now = self.clock.now();
        let record = self.checked_dashboard(new_id(), body, now, now).await?;
        let event = self.event(caller, "dashboard.create", record.id, ip);
        Ok(self.store.save_dashboard(&record, false, event).await?)
    }

    /// Changes the fields of `patch`.
    pub async fn update_dashboard(
        &self,
        caller: &Principal,
        id: Uuid,
        patch: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DashboardRecord, ViewError> {
        let current = self.dashboard(id).await?;
        let fields = Map::from_iter([
            ("slug".into(), json!(current.slug)),
            ("name".into(), json!(current.name)),
            ("refreshSeconds".into(), json!(current.refresh_seconds)),
            ("widgets".into(), current.widgets.clone()),
        ]);
        let body = patched(fields, patch);
        let record = self
            .checked_dashboard(id, &body, current.created_at, self.clock.now())
            .await?;
        let event = self.event(caller, "dashboard.update", id, ip);
        Ok(self.store.save_dashboard(&record, true, event).await?)
    }

    /// Deletes a dashboard.
    pub async fn delete_dashboard(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), ViewError> {
        let event = self.event(caller, "dashboard.delete", id, ip);
        found(self.store.delete_dashboard(id, event).await?)
    }

    /// `GET /api/dashboards/{slug}`: the dashboard with each widget's rows
    /// read concurrently under the caller's grants.
    pub async fn resolve(
        &self,
        request: DataRequest<'_>,
        slug: &str,
    ) -> Result<ResolvedDashboard, ViewError> {
        let params = ListParams::default();
        // Resolved afresh: a dashboard whose widgets all refuse before
        // reading sends no statement that would check a remembered caller.
        let (record, widgets, zone, rows) = self
            .data
            .as_current_caller(request, Plane::Api, async |caller, version| {
                // Looked up once the caller is known: a bad credential
                // is refused whether or not the slug exists.
                let record = self
                    .store
                    .dashboard(None, Some(slug))
                    .await
                    .map_err(DataError::Store)?
                    .ok_or(DataError::NotFound)?;
                let widgets = parse_widgets(Some(&record.widgets)).map_err(DataError::Payload)?;
                let reads = widgets
                    .iter()
                    .map(|w| self.read_as(caller, version, ViewKey::Id(w.data_view_id), &params));
                let mut rows = join_all(reads).await;
                // A failure of the shared state fails the whole (planned
                // again); a widget past the statement timeout shows it alone.
                if let Some(at) = rows
                    .iter()
                    .position(|r| matches!(r, Err(e @ DataError::Store(_)) if e.retried()))
                    && let Err(e) = rows.swap_remove(at)
                {
                    return Err(e);
                }
                let system = self
                    .store
                    .statement_settings()
                    .await
                    .map_err(DataError::Store)?
                    .timezone;
                let zone = zone::caller_zone(
                    caller.principal.timezone.as_deref(),
                    system.as_deref(),
                    caller.zone_header,
                );
                Ok((record, widgets, zone.name().to_owned(), rows))
            })
            .await?;
        Ok(ResolvedDashboard {
            record,
            zone,
            widgets: widgets
                .into_iter()
                .zip(rows)
                .map(|(widget, rows)| ResolvedWidget {
                    widget,
                    rows: rows.map(|page| page.rows),
                })
                .collect(),
        })
    }

    /// The dashboards the bearer may read something on: every one for an
    /// administrator, else those with a widget whose view they hold a
    /// read grant on.
    pub async fn readable_dashboards(
        &self,
        request: DataRequest<'_>,
    ) -> Result<Vec<DashboardRecord>, ViewError> {
        // Resolved afresh: nothing below checks a remembered caller.
        Ok(self
            .data
            .as_current_caller(request, Plane::Api, async |caller, _| {
                let all = self.store.dashboards().await.map_err(DataError::Store)?;
                let mut readable = Vec::new();
                for record in &all {
                    let widgets = parse_widgets(Some(&record.widgets)).unwrap_or_default();
                    let mut any = caller.principal.admin;
                    for widget in &widgets {
                        if any {
                            break;
                        }
                        if let Some(view) = self
                            .store
                            .published_view(ViewKey::Id(widget.data_view_id))
                            .await
                            .map_err(DataError::Store)?
                        {
                            any = Access::evaluate(caller.principal, &view.scopes, Action::Read)
                                .is_ok();
                        }
                    }
                    if any {
                        readable.push(record.clone());
                    }
                }
                Ok(readable)
            })
            .await?)
    }

    /// A dashboard record from `body`, its widgets checked against their DataViews.
    async fn checked_dashboard(
        &self,
        id: Uuid,
        body: &Map<String, Value>,
        created_at: chrono::DateTime<chrono::Utc>,
        updated_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<DashboardRecord, ViewError> {
        let (slug, name) = slug_and_name(body)?;
        let refresh_seconds = match body.get("refreshSeconds") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|n| (5..=86_400).contains(n))
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        FieldError::new("refreshSeconds", "must be from 5 to 86400 seconds")
                    })?,
            ),
        };
        let widgets = parse_widgets(body.get("widgets"))?;
        for (i, widget) in widgets.iter().enumerate() {
            let view = self
                .store
                .dataview(widget.data_view_id)
                .await?
                .ok_or_else(|| {
                    FieldError::new(format!("widgets[{i}].dataViewId"), "no such DataView")
                })?;
            let definition = view.published.as_ref().unwrap_or(&view.draft);
            let outputs: Vec<String> = definition["columns"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect();
            widget.check_columns(i, &outputs)?;
        }
        Ok(DashboardRecord {
            id,
            slug,
            name,
            refresh_seconds,
            widgets: Value::Array(widgets.iter().map(Widget::to_json).collect()),
            created_at,
            updated_at,
        })
    }
}
