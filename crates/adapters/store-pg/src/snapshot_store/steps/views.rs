//! A snapshot's DataViews and dashboards, checked against the tables and
//! views they read.

use crate::db::Txn;
use kernel::{FieldError, StoreError, new_id};
use serde_json::Value as Json;
use snapshot::{Dashboard, DataView, ViewSource, at};

use super::{DATAVIEW_ID, Memo, id_of, within};
use crate::query::Query;
use crate::schema_store::alter::facts;
use crate::{PgStore, execute, rows, stmt};

/// Deletes a DataView by slug (`$1`).
pub(super) const DROP_DATAVIEW: &str = "DELETE FROM svc.dataviews WHERE slug = $1";
/// Deletes a dashboard by slug (`$1`).
pub(super) const DROP_DASHBOARD: &str = "DELETE FROM svc.dashboards WHERE slug = $1";

/// Creates the DataView (checked by the plan), or (applying) replaces the
/// one of that slug; each definition's source table must have the
/// columns it names.
pub(super) async fn put_dataview(
    store: &PgStore,
    txn: &Txn,
    (view, sources): (&DataView, &[ViewSource]),
    dry: bool,
    memo: &mut Memo,
) -> Result<(), StoreError> {
    let (slug, name) = (view.slug.clone(), view.name.clone());
    for source in sources {
        source_columns(txn, source).await?;
    }
    let on_taken = if dry {
        // Later steps read the columns the snapshot gives it.
        let shown = view.published.as_ref().unwrap_or(&view.draft);
        memo.view_columns.insert(slug.clone(), output_names(shown));
        "DO NOTHING"
    } else {
        "DO UPDATE SET name = EXCLUDED.name, draft = EXCLUDED.draft, published = EXCLUDED.published, \
         published_at = CASE WHEN svc.dataviews.published IS NOT DISTINCT FROM EXCLUDED.published THEN svc.dataviews.published_at ELSE EXCLUDED.published_at END, \
         updated_at = EXCLUDED.updated_at"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.dataviews (id, slug, name, draft, published, published_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, CASE WHEN $5::jsonb IS NULL THEN NULL ELSE $6 END, $6, $6) \
             ON CONFLICT (slug) {on_taken}"
        ),
        vec![new_id().into(), slug.into(), name.into(), view.draft.clone().into(), view.published.clone().into(), store.now().into()],
    )
    .await?;
    Ok(())
}

/// The output column names of a DataView definition.
fn output_names(definition: &Json) -> Vec<String> {
    definition["columns"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The output columns of the DataView `slug`: what an earlier step of
/// this diff gives it, else what is stored (None: no such DataView).
pub(super) async fn view_outputs(
    txn: &Txn,
    memo: &Memo,
    slug: &str,
) -> Result<Option<Vec<String>>, StoreError> {
    if let Some(columns) = memo.view_columns.get(slug) {
        return Ok(Some(columns.clone()));
    }
    let row = txn
        .fetch_optional(stmt(
            "SELECT ARRAY(SELECT c ->> 'name' FROM jsonb_array_elements(coalesce(published, draft) -> 'columns') c) AS names \
             FROM svc.dataviews WHERE slug = $1",
            [slug.into()],
        )).await?;
    row.map(|r| rows::column::<Vec<String>>(&r, "names"))
        .transpose()
}

/// Checks that a DataView's source is a table with the columns it names.
async fn source_columns(txn: &Txn, read: &ViewSource) -> Result<(), StoreError> {
    let path = &read.path;
    let source = facts(txn, &read.schema, &read.table)
        .await
        .map_err(|_| FieldError::new(format!("{path}.source"), "is not a table"))?;
    match read.columns.iter().find(|c| source.column(c).is_none()) {
        Some(unknown) => Err(FieldError::new(
            format!("{path}.columns"),
            format!(
                "{unknown} is not a column of {}.{}",
                read.schema, read.table
            ),
        )
        .into()),
        None => Ok(()),
    }
}

/// Creates the dashboard (its slug, name and refresh checked by the
/// plan), or (applying) replaces the one of that slug; each widget's
/// DataView and columns must exist.
pub(super) async fn put_dashboard(
    store: &PgStore,
    txn: &Txn,
    dashboard: &Dashboard,
    path: &str,
    dry: bool,
    memo: &Memo,
) -> Result<(), StoreError> {
    let (slug, name) = (dashboard.slug.clone(), dashboard.name.clone());
    let mut widgets = Vec::with_capacity(dashboard.widgets.len());
    let mut views = Vec::with_capacity(dashboard.widgets.len());
    for (i, widget) in dashboard.widgets.iter().enumerate() {
        let mut widget = widget.clone();
        views.push(widget["dataView"].as_str().unwrap_or_default().to_owned());
        if let Some(fields) = widget.as_object_mut()
            && let Some(view) = fields.remove("dataView")
        {
            let id = id_of(
                txn,
                DATAVIEW_ID,
                view.as_str().unwrap_or_default(),
                &format!("{path}.widgets[{i}].dataView"),
            )
            .await?;
            fields.insert("dataViewId".into(), Json::String(id.to_string()));
        }
        widgets.push(widget);
    }
    let widgets = Json::Array(widgets);
    let parsed = views::dashboard::parse_widgets(Some(&widgets)).map_err(|e| at(path, e))?;
    for (i, widget) in parsed.iter().enumerate() {
        let slug = views.get(i).map_or("", String::as_str);
        let outputs = view_outputs(txn, memo, slug).await?.unwrap_or_default();
        widget.check_columns(i, &outputs).map_err(|e| at(path, e))?;
    }
    let refresh = dashboard
        .refresh_seconds
        .map(|s| i32::try_from(s).unwrap_or(i32::MAX));
    let on_taken = if dry {
        "DO NOTHING"
    } else {
        "DO UPDATE SET name = EXCLUDED.name, refresh_seconds = EXCLUDED.refresh_seconds, widgets = EXCLUDED.widgets, updated_at = EXCLUDED.updated_at"
    };
    execute(
        txn,
        &format!(
            "INSERT INTO svc.dashboards (id, slug, name, refresh_seconds, widgets, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (slug) {on_taken}"
        ),
        vec![new_id().into(), slug.into(), name.into(), refresh.into(), widgets.into(), store.now().into()],
    )
    .await
    .map_err(within(path))?;
    Ok(())
}
