//! DataViews and dashboards: administration (drafts checked against their
//! source when saved, published snapshots), and reads under each caller's
//! grants on the view and on its source.

use std::sync::Arc;

use audit::AuditEvent;
use data::{Caller, DataError, DataRequest, DataService, ListParams, Page, Table};
use futures_util::future::join_all;
use kernel::validate::{short_text, slug};
use kernel::{Clock, FieldError, StoreError, new_id};
use permissions::{Access, Action, Plane, Principal, zone};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::dashboard::{Widget, parse_widgets};
use crate::definition::Definition;
use crate::error::ViewError;
use crate::query::{Request, compile};
use crate::store::{
    DashboardRecord, DataViewRecord, PublishedView, ViewAnswer, ViewKey, ViewStore,
};

/// A draft run by an administrator.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The statement that ran.
    pub sql: String,
    /// The values bound to it.
    pub params: Vec<Value>,
    /// The rows, as a JSON array's text.
    pub rows: String,
}

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

/// DataViews and dashboards.
#[derive(Clone)]
pub struct ViewService {
    store: Arc<dyn ViewStore>,
    data: DataService,
    clock: Arc<dyn Clock>,
}

impl ViewService {
    /// A service over `store`; `data` resolves the callers of reads.
    pub fn new(store: Arc<dyn ViewStore>, data: DataService, clock: Arc<dyn Clock>) -> Self {
        Self { store, data, clock }
    }

    /// Every DataView.
    pub async fn list(&self) -> Result<Vec<DataViewRecord>, ViewError> {
        Ok(self.store.dataviews().await?)
    }

    /// One DataView.
    pub async fn get(&self, id: Uuid) -> Result<DataViewRecord, ViewError> {
        self.store
            .dataview(id)
            .await?
            .ok_or(ViewError::Store(StoreError::NotFound))
    }

    /// Creates a draft from `body` (`slug`, `name` and the definition),
    /// checked against its source.
    pub async fn create(
        &self,
        caller: &Principal,
        body: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let now = self.clock.now();
        let record = self
            .checked_view(new_id(), body, now, now, None, None)
            .await?;
        let event = self.event(caller, "dataview.create", record.id, ip);
        Ok(self.store.save_dataview(&record, false, event).await?)
    }

    /// Changes the fields of `patch` (the others keep their value); what is
    /// served changes only at the next publish.
    pub async fn update(
        &self,
        caller: &Principal,
        id: Uuid,
        patch: &Map<String, Value>,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let current = self.get(id).await?;
        let mut body = current.draft.as_object().cloned().unwrap_or_default();
        body.insert("slug".into(), json!(current.slug));
        body.insert("name".into(), json!(current.name));
        body.extend(patch.iter().map(|(k, v)| (k.clone(), v.clone())));
        let record = self
            .checked_view(
                id,
                &body,
                current.created_at,
                self.clock.now(),
                current.published,
                current.published_at,
            )
            .await?;
        let event = self.event(caller, "dataview.update", id, ip);
        Ok(self.store.save_dataview(&record, true, event).await?)
    }

    /// Deletes a DataView with its grants.
    pub async fn delete(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<(), ViewError> {
        let event = self.event(caller, "dataview.delete", id, ip);
        found(self.store.delete_dataview(id, event).await?)
    }

    /// Publishes the draft, checked again against its source as it is now.
    pub async fn publish(
        &self,
        caller: &Principal,
        id: Uuid,
        ip: Option<String>,
    ) -> Result<DataViewRecord, ViewError> {
        let current = self.get(id).await?;
        let definition = Definition::parse(current.draft.as_object().unwrap_or(&Map::new()))?;
        self.source_shape(&definition).await?;
        let event = self.event(caller, "dataview.publish", id, ip);
        self.store
            .publish_dataview(id, self.clock.now(), event)
            .await?
            .ok_or(ViewError::Store(StoreError::NotFound))
    }

    /// Runs the draft as the administrator the bearer stands for: the SQL
    /// that ran, with its values and rows.
    pub async fn preview(&self, request: DataRequest<'_>, id: Uuid) -> Result<Preview, ViewError> {
        let current = self.get(id).await?;
        let definition = Definition::parse(current.draft.as_object().unwrap_or(&Map::new()))?;
        let params = ListParams::default();
        let answer = self
            .data
            .as_caller(
                request,
                Plane::Admin,
                DataError::retried,
                async |caller, version| {
                    let (source, shape) =
                        self.source_shape(&definition).await.map_err(|e| match e {
                            ViewError::Data(e) => e,
                            ViewError::Store(e) => DataError::Store(e),
                            ViewError::Invalid(e) => DataError::Payload(e),
                        })?;
                    self.run(caller, version, &definition, &source, &shape, &[], &params)
                        .await
                },
            )
            .await?;
        Ok(Preview {
            sql: answer.sql,
            params: answer.params,
            rows: answer.found.json.unwrap_or_else(|| "[]".to_owned()),
        })
    }

    /// `GET /api/views/{slug}`: a page of the published view's output.
    pub async fn read(
        &self,
        request: DataRequest<'_>,
        slug: &str,
        params: &ListParams,
    ) -> Result<Page, ViewError> {
        Ok(self
            .data
            .as_caller(
                request,
                Plane::Api,
                DataError::retried,
                async |caller, version| {
                    self.read_as(caller, version, ViewKey::Slug(slug), params)
                        .await
                },
            )
            .await?)
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
                let (system, _) = self
                    .store
                    .system_timezone()
                    .await
                    .map_err(DataError::Store)?;
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

    /// Every published view that serves (for the per-role OpenAPI document).
    pub async fn published(&self) -> Result<Vec<Arc<PublishedView>>, ViewError> {
        Ok(self.store.published_views().await?)
    }

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
        let mut body = Map::new();
        body.insert("slug".into(), json!(current.slug));
        body.insert("name".into(), json!(current.name));
        body.insert("refreshSeconds".into(), json!(current.refresh_seconds));
        body.insert("widgets".into(), current.widgets.clone());
        body.extend(patch.iter().map(|(k, v)| (k.clone(), v.clone())));
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

    /// Reads a published view as `caller`, resolved at auth version `version`.
    async fn read_as(
        &self,
        caller: Caller<'_>,
        version: i64,
        key: ViewKey<'_>,
        params: &ListParams,
    ) -> Result<Page, DataError> {
        let view = self
            .store
            .published_view(key)
            .await
            .map_err(DataError::Store)?
            .ok_or(DataError::NotFound)?;
        let answer = self
            .run(
                caller,
                version,
                &view.definition,
                &view.source,
                &view.shape,
                &view.scopes,
                params,
            )
            .await?;
        Ok(Page {
            rows: answer.found.json.unwrap_or_else(|| "[]".to_owned()),
            limit: answer.limit,
            offset: answer.offset,
            total: answer.found.total,
        })
    }

    /// Runs `definition` as `caller`: grants of the view (`view_scopes`)
    /// and of the source apply.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        caller: Caller<'_>,
        version: i64,
        definition: &Definition,
        source: &Table,
        shape: &Table,
        view_scopes: &[permissions::Scope],
        params: &ListParams,
    ) -> Result<Ran, DataError> {
        let granted = Access::evaluate(caller.principal, view_scopes, Action::Read)?;
        let access = Access::evaluate(caller.principal, &source.scopes, Action::Read)?;
        let request = Request::check(params, shape, definition)?;
        let query = compile(definition, source, shape, &access, &granted, &request)?;
        let context = self
            .data
            .context_at(caller, version, source.version)
            .await?;
        let ViewAnswer { sql, params, found } = self
            .store
            .run_view(&query, &context)
            .await
            .map_err(data::read_error)?;
        Ok(Ran {
            sql,
            params,
            found,
            limit: request.limit,
            offset: request.offset,
        })
    }

    /// The source table of `definition` and the output it gives there.
    async fn source_shape(
        &self,
        definition: &Definition,
    ) -> Result<(Arc<Table>, Table), ViewError> {
        let source = self
            .store
            .table(&definition.schema, &definition.table)
            .await?
            .ok_or_else(|| {
                FieldError::new(
                    "source",
                    format!(
                        "{}.{} is not a registered table",
                        definition.schema, definition.table
                    ),
                )
            })?;
        let shape = definition.shape(&source)?;
        Ok((source, shape))
    }

    async fn checked_view(
        &self,
        id: Uuid,
        body: &Map<String, Value>,
        created_at: chrono::DateTime<chrono::Utc>,
        updated_at: chrono::DateTime<chrono::Utc>,
        published: Option<Value>,
        published_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<DataViewRecord, ViewError> {
        let slug = slug(text(body, "slug"), "slug")?;
        let name = short_text(text(body, "name"), "name", 200)?;
        let definition = Definition::parse(body)?;
        self.source_shape(&definition).await?;
        Ok(DataViewRecord {
            id,
            slug,
            name,
            draft: definition.to_json(),
            published,
            published_at,
            created_at,
            updated_at,
        })
    }

    async fn checked_dashboard(
        &self,
        id: Uuid,
        body: &Map<String, Value>,
        created_at: chrono::DateTime<chrono::Utc>,
        updated_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<DashboardRecord, ViewError> {
        let slug = slug(text(body, "slug"), "slug")?;
        let name = short_text(text(body, "name"), "name", 200)?;
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

    fn event(
        &self,
        caller: &Principal,
        action: &'static str,
        id: Uuid,
        ip: Option<String>,
    ) -> AuditEvent {
        let kind = action.split('.').next().unwrap_or(action);
        AuditEvent::new(caller.actor(), action, Some(format!("{kind}:{id}")), ip)
    }
}

/// A view read's statement and answer, with the page it asked for.
struct Ran {
    sql: String,
    params: Vec<Value>,
    found: data::Found,
    limit: u32,
    offset: u64,
}

/// NOT_FOUND unless a record was there.
fn found(existed: bool) -> Result<(), ViewError> {
    if existed {
        Ok(())
    } else {
        Err(StoreError::NotFound.into())
    }
}

/// A text field of a body; empty when absent (the checks name it).
fn text<'b>(body: &'b Map<String, Value>, key: &str) -> &'b str {
    body.get(key).and_then(Value::as_str).unwrap_or_default()
}
