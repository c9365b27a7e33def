//! The checks a plan passes before anything runs: everything about a
//! step that its own input decides (names, slugs, the fit of a grant's
//! action and target, a DataView's definitions, a dashboard's refresh, a
//! setting that a snapshot may not set). What needs the instance's state
//! (a name turned into an id, a column that must exist) is the store's,
//! in the apply's transaction.

use kernel::filter::Filter;
use kernel::validate::{short_text, slug};
use kernel::{FieldError, settings};
use serde_json::Map;
use views::definition::{Definition, Measure};

use crate::diff::{Operation, Step};
use crate::model::{Dashboard, DataView, Grant};

/// What a DataView definition reads: its source table and the columns
/// it names there (output columns first, then its filter's), found when
/// [`diff`](fn@crate::diff) checks the plan, for the store to find in the
/// catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSource {
    /// Where the definition is in the snapshot (`dataviews[i].draft`).
    pub path: String,
    /// The source table's schema.
    pub schema: String,
    /// The source table.
    pub table: String,
    /// The source columns it names.
    pub columns: Vec<String>,
}

/// Checks every step of a plan, trims the slugged names it keeps, and fills each
/// DataView step's [`ViewSource`]s; the first refusal names its path in
/// the snapshot.
pub fn check(steps: &mut [Step]) -> Result<(), FieldError> {
    for step in steps {
        match &mut step.operation {
            // A role's path is its name as written; the store trims it.
            Operation::PutRole(role) => {
                let path = format!("roles.{}", role.name);
                short_text(&role.name, "name", 200).map_err(|e| at(&path, e))?;
            }
            Operation::PutWorkflow(workflow, path) => {
                (workflow.slug, workflow.name) =
                    slug_and_name(&workflow.slug, &workflow.name, path)?;
            }
            Operation::PutDataView(view, path, sources) => {
                *sources = dataview(view, path)?;
            }
            Operation::PutDashboard(dashboard, path) => dashboard_fields(dashboard, path)?,
            Operation::CreateGrant(grant, path) => self::grant(grant, path)?,
            Operation::SetSetting(key, _) if settings::session_only(key) => {
                return Err(FieldError::new(
                    format!("settings.{key}"),
                    "changes only through PATCH /admin/api/settings, by an administrator signed in with a session",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A slug and a name, checked and trimmed.
fn slug_and_name(raw_slug: &str, name: &str, path: &str) -> Result<(String, String), FieldError> {
    Ok((
        slug(raw_slug, "slug").map_err(|e| at(path, e))?,
        short_text(name, "name", 200).map_err(|e| at(path, e))?,
    ))
}

/// A DataView's slug, name and definitions; answers what each definition
/// reads.
fn dataview(view: &mut DataView, path: &str) -> Result<Vec<ViewSource>, FieldError> {
    (view.slug, view.name) = slug_and_name(&view.slug, &view.name, path)?;
    let mut sources = Vec::with_capacity(2);
    for (field, definition) in [
        ("draft", Some(&view.draft)),
        ("published", view.published.as_ref()),
    ] {
        let Some(definition) = definition else {
            continue;
        };
        let path = format!("{path}.{field}");
        let empty = Map::new();
        let parsed = Definition::parse(definition.as_object().unwrap_or(&empty))
            .map_err(|e| at(&path, e))?;
        let named = parsed.columns.iter().filter_map(|c| match &c.measure {
            Measure::Plain(column) | Measure::Bucket(_, column) | Measure::Agg(_, Some(column)) => {
                Some(column.clone())
            }
            Measure::Agg(_, None) => None,
        });
        let filtered = parsed
            .filter
            .iter()
            .flat_map(Filter::columns)
            .map(str::to_owned);
        sources.push(ViewSource {
            path,
            schema: parsed.schema,
            table: parsed.table,
            columns: named.chain(filtered).collect(),
        });
    }
    Ok(sources)
}

/// A dashboard's slug, name and refresh (its widgets name DataViews, which
/// the store finds).
fn dashboard_fields(dashboard: &mut Dashboard, path: &str) -> Result<(), FieldError> {
    (dashboard.slug, dashboard.name) = slug_and_name(&dashboard.slug, &dashboard.name, path)?;
    if dashboard
        .refresh_seconds
        .is_some_and(|s| !(5..=86_400).contains(&s))
    {
        return Err(FieldError::new(
            format!("{path}.refreshSeconds"),
            "must be from 5 to 86400",
        ));
    }
    Ok(())
}

/// A grant as the grants route checks it before looking anything up: one
/// target, an action that fits it, a row filter that parses (not on a
/// workflow), columns only on a table.
fn grant(grant: &Grant, path: &str) -> Result<(), FieldError> {
    let fits = match (
        &grant.resource,
        &grant.workflow,
        &grant.data_view,
        &grant.function,
    ) {
        (Some(_), None, None, None) => {
            ["read", "create", "update", "delete"].contains(&grant.action.as_str())
        }
        (None, Some(_), None, None) | (None, None, None, Some(_)) => grant.action == "invoke",
        (None, None, Some(_), None) => grant.action == "read",
        _ => {
            return Err(FieldError::new(
                path.to_owned(),
                "names exactly one of resource, workflow, dataView and function",
            ));
        }
    };
    if !fits {
        return Err(FieldError::new(
            format!("{path}.action"),
            "does not fit the grant's target (read, create, update or delete a table; invoke a workflow or a function; read a DataView)",
        ));
    }
    if let Some(filter) = &grant.filter {
        Filter::parse(filter, "filter").map_err(|e| at(path, e))?;
        if grant.workflow.is_some() || grant.function.is_some() {
            return Err(FieldError::new(
                format!("{path}.filter"),
                "workflow and function grants take no row filter",
            ));
        }
    }
    if grant.columns.is_some() && grant.resource.is_none() {
        return Err(FieldError::new(
            format!("{path}.columns"),
            "only table grants take columns",
        ));
    }
    Ok(())
}

/// `e` at `path` in the snapshot.
pub fn at(path: &str, e: FieldError) -> FieldError {
    let field = if e.field.is_empty() {
        path.to_owned()
    } else {
        format!("{path}.{}", e.field)
    };
    FieldError::new(field, e.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Snapshot, diff};
    use serde_json::{Value, json};

    fn planned(snapshot: Value) -> Result<Vec<Step>, FieldError> {
        diff(&Snapshot::default(), &Snapshot::parse(&snapshot).unwrap())
    }

    #[test]
    fn names_are_trimmed_and_a_bad_slug_is_refused_at_its_path() {
        let steps = planned(json!({ "version": 1, "workflows": [
            { "slug": "w", "name": "  Weekly ", "draft": { "trigger": { "type": "manual" }, "steps": [] } }
        ] }))
        .unwrap();
        assert!(matches!(&steps[0].operation, Operation::PutWorkflow(w, _) if w.name == "Weekly"));
        let refused = planned(json!({ "version": 1, "roles": [{ "name": " " }] })).unwrap_err();
        assert_eq!(refused.field, "roles. .name");
        let refused = planned(json!({ "version": 1, "workflows": [
            { "slug": "Bad Slug", "name": "x", "draft": { "trigger": { "type": "manual" }, "steps": [] } }
        ] }))
        .unwrap_err();
        assert_eq!(refused.field, "workflows[0].slug");
    }

    #[test]
    fn a_grant_whose_action_does_not_fit_its_target_is_refused() {
        let refused = planned(json!({ "version": 1, "grants": [
            { "role": "r", "workflow": "w", "action": "read" }
        ] }))
        .unwrap_err();
        assert_eq!(refused.field, "grants[0].action");
        let refused = planned(json!({ "version": 1, "grants": [
            { "role": "r", "workflow": "w", "action": "invoke", "filter": { "a": { "eq": 1 } } }
        ] }))
        .unwrap_err();
        assert_eq!(refused.field, "grants[0].filter");
        let refused = planned(json!({ "version": 1, "grants": [
            { "role": "r", "dataView": "v", "action": "read", "columns": ["a"] }
        ] }))
        .unwrap_err();
        assert_eq!(refused.field, "grants[0].columns");
    }

    #[test]
    fn a_dataview_step_carries_what_its_definitions_read() {
        let steps = planned(json!({ "version": 1, "dataviews": [{
            "slug": "totals", "name": "Totals",
            "draft": { "source": "app.orders", "columns": [
                { "name": "day", "bucket": "day", "column": "placed_at" },
                { "name": "n", "agg": "count" }
            ], "filter": { "status": { "eq": "paid" } } }
        }] }))
        .unwrap();
        let Operation::PutDataView(_, _, sources) = &steps[0].operation else {
            panic!("{steps:?}");
        };
        assert_eq!(
            sources,
            &[ViewSource {
                path: "dataviews[0].draft".into(),
                schema: "app".into(),
                table: "orders".into(),
                columns: vec!["placed_at".into(), "status".into()],
            }]
        );
    }

    #[test]
    fn a_refresh_out_of_range_and_a_session_only_setting_are_refused() {
        let refused = planned(json!({ "version": 1, "dashboards": [
            { "slug": "d", "name": "D", "refreshSeconds": 2 }
        ] }))
        .unwrap_err();
        assert_eq!(refused.field, "dashboards[0].refreshSeconds");
        let refused =
            planned(json!({ "version": 1, "settings": { "mcp.enabled": true } })).unwrap_err();
        assert_eq!(refused.field, "settings.mcp.enabled");
    }
}
