//! The steps that make an instance match a snapshot, in the order they run:
//! what refers to something goes before it is dropped and after it is made.

use kernel::FieldError;
use schema::ColumnPatch;
use serde_json::Value;

mod admin;
mod tables;

pub use admin::{AdminPower, CREDENTIAL_SETTINGS, admin_candidates, mark_admin_power};
use tables::{functions, resources, tables};

use crate::check::ViewSource;
use crate::model::{
    Column, Dashboard, DataView, Function, Grant, Index, Resource, Role, Slugged, Snapshot, Table,
    Workflow,
};

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Makes something new.
    Create,
    /// Changes something that exists.
    Alter,
    /// Removes something.
    Drop,
}

impl Action {
    /// `create`, `alter` or `drop`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Alter => "alter",
            Action::Drop => "drop",
        }
    }
}

/// What a step runs; `path` fields name where in the snapshot its input is,
/// for a refusal's `field`.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// Creates or changes a role.
    PutRole(Role),
    /// Drops a role.
    DropRole(String),
    /// Creates a table (hidden) with its keys and foreign-key indexes.
    CreateTable(Table, String),
    /// Drops a table.
    DropTable(String, String),
    /// Adds a column.
    AddColumn(String, String, Column, String),
    /// Changes a column.
    AlterColumn(String, String, String, ColumnPatch, String),
    /// Drops a column.
    DropColumn(String, String, String),
    /// Builds an index (in the transaction).
    CreateIndex(String, String, Index, String),
    /// Drops an index.
    DropIndex(String, String),
    /// Registers an existing table as a resource.
    RegisterResource(String, String),
    /// Sets a resource's exposure.
    Expose(Resource, String),
    /// Registers an existing database function; the path is its entry's.
    RegisterFunction(Function, String),
    /// Sets a registered function's exposure.
    ExposeFunction(Function, String),
    /// Creates or changes a workflow.
    PutWorkflow(Workflow, String),
    /// Drops a workflow.
    DropWorkflow(String),
    /// Creates or changes a DataView; what its definitions read comes
    /// from the plan's check in [`diff`](fn@crate::diff).
    PutDataView(DataView, String, Vec<ViewSource>),
    /// Drops a DataView.
    DropDataView(String),
    /// Creates or changes a dashboard.
    PutDashboard(Dashboard, String),
    /// Drops a dashboard.
    DropDashboard(String),
    /// Creates a grant.
    CreateGrant(Grant, String),
    /// Drops a grant.
    DropGrant(Grant),
    /// Sets one setting.
    SetSetting(String, Value),
}

/// One change.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// create, alter or drop.
    pub action: Action,
    /// table, column, index, resource, function, role, grant, workflow,
    /// dataview, dashboard or setting.
    pub kind: &'static str,
    /// What it changes, by name.
    pub name: String,
    /// Whether it drops a table, a column, a role, a grant or a workflow, or
    /// changes a type.
    pub destructive: bool,
    /// A setting's value before and after, as shown (secrets `[REDACTED]`).
    pub values: Option<(Value, Value)>,
    /// What in it gives administrator power and why, if anything does
    /// (see [`mark_admin_power`]).
    pub admin_power: Option<AdminPower>,
    /// What runs.
    pub operation: Operation,
}

fn step(action: Action, kind: &'static str, name: String, operation: Operation) -> Step {
    let destructive = action == Action::Drop
        && matches!(kind, "table" | "column" | "role" | "grant" | "workflow")
        || matches!(&operation, Operation::AlterColumn(_, _, _, p, _) if p.data_type.is_some());
    Step {
        action,
        kind,
        name,
        destructive,
        values: None,
        admin_power: None,
        operation,
    }
}

/// `value` of the setting `key` as a diff shows it: a provider's
/// `clientSecret` as `[REDACTED]`.
fn shown(key: &str, value: &Value) -> Value {
    let mut value = value.clone();
    if key == "auth.oauth"
        && let Some(providers) = value.as_object_mut()
    {
        for provider in providers.values_mut() {
            if let Some(secret) = provider.get_mut("clientSecret")
                && !secret.is_null()
            {
                *secret = Value::String("[REDACTED]".into());
            }
        }
    }
    value
}

/// The steps that make `current` into `desired`, in order.
pub fn diff(current: &Snapshot, desired: &Snapshot) -> Result<Vec<Step>, FieldError> {
    let mut first = Vec::new();
    let mut middle = Vec::new();
    let mut last = Vec::new();
    referrers(current, desired, &mut first);
    roles(current, desired, &mut middle, &mut last);
    let created = tables(current, desired, &mut middle, &mut last)?;
    resources(current, desired, &created, &mut middle);
    functions(current, desired, &mut middle);
    definitions(current, desired, &mut middle);
    grants(current, desired, &mut middle);
    for (key, value) in &desired.settings {
        if current.settings.get(key) != Some(value) {
            let mut change = step(
                Action::Alter,
                "setting",
                key.clone(),
                Operation::SetSetting(key.clone(), value.clone()),
            );
            let old = current.settings.get(key).cloned().unwrap_or(Value::Null);
            change.values = Some((shown(key, &old), shown(key, value)));
            middle.push(change);
        }
    }
    first.extend(middle);
    first.extend(last);
    crate::check::check(&mut first)?;
    Ok(first)
}

/// Drops of what refers to tables and roles: grants, dashboards, DataViews
/// and workflows the snapshot does not have.
fn referrers(current: &Snapshot, desired: &Snapshot, out: &mut Vec<Step>) {
    for g in current
        .grants
        .iter()
        .filter(|g| !desired.grants.contains(g))
    {
        let name = format!("{} {} {}", g.role, g.action, g.target());
        out.push(step(
            Action::Drop,
            "grant",
            name,
            Operation::DropGrant(g.clone()),
        ));
    }
    dropped(
        &current.dashboards,
        &desired.dashboards,
        "dashboard",
        Operation::DropDashboard,
        out,
    );
    dropped(
        &current.dataviews,
        &desired.dataviews,
        "dataview",
        Operation::DropDataView,
        out,
    );
    dropped(
        &current.workflows,
        &desired.workflows,
        "workflow",
        Operation::DropWorkflow,
        out,
    );
}

fn roles(current: &Snapshot, desired: &Snapshot, middle: &mut Vec<Step>, last: &mut Vec<Step>) {
    let same = |a: &Role, b: &Role| a.name.eq_ignore_ascii_case(&b.name);
    for r in &desired.roles {
        match current.roles.iter().find(|c| same(c, r)) {
            None => middle.push(step(
                Action::Create,
                "role",
                r.name.clone(),
                Operation::PutRole(r.clone()),
            )),
            Some(c) if c != r => middle.push(step(
                Action::Alter,
                "role",
                r.name.clone(),
                Operation::PutRole(r.clone()),
            )),
            Some(_) => {}
        }
    }
    for c in &current.roles {
        if !desired.roles.iter().any(|r| same(c, r)) {
            last.push(step(
                Action::Drop,
                "role",
                c.name.clone(),
                Operation::DropRole(c.name.clone()),
            ));
        }
    }
}

/// Creates and changes of DataViews, then workflows, then dashboards (which
/// name views).
fn definitions(current: &Snapshot, desired: &Snapshot, out: &mut Vec<Step>) {
    put(
        &current.dataviews,
        &desired.dataviews,
        ("dataview", "dataviews"),
        |view, path| Operation::PutDataView(view, path, Vec::new()),
        out,
    );
    put(
        &current.workflows,
        &desired.workflows,
        ("workflow", "workflows"),
        Operation::PutWorkflow,
        out,
    );
    put(
        &current.dashboards,
        &desired.dashboards,
        ("dashboard", "dashboards"),
        Operation::PutDashboard,
        out,
    );
}

/// Drops of what `current` has and `desired` lacks, by slug.
fn dropped<T: Slugged>(
    current: &[T],
    desired: &[T],
    kind: &'static str,
    operation: fn(String) -> Operation,
    out: &mut Vec<Step>,
) {
    for c in current
        .iter()
        .filter(|c| !desired.iter().any(|d| d.slug() == c.slug()))
    {
        out.push(step(
            Action::Drop,
            kind,
            c.slug().to_owned(),
            operation(c.slug().to_owned()),
        ));
    }
}

/// Creates and changes of what `desired` has, by slug; `list` names the
/// snapshot's list for the step's path.
fn put<T: Slugged + Clone + PartialEq>(
    current: &[T],
    desired: &[T],
    (kind, list): (&'static str, &str),
    operation: fn(T, String) -> Operation,
    out: &mut Vec<Step>,
) {
    for (i, d) in desired.iter().enumerate() {
        let found = current.iter().find(|c| c.slug() == d.slug());
        if found != Some(d) {
            let action = if found.is_some() {
                Action::Alter
            } else {
                Action::Create
            };
            out.push(step(
                action,
                kind,
                d.slug().to_owned(),
                operation(d.clone(), format!("{list}[{i}]")),
            ));
        }
    }
}

fn grants(current: &Snapshot, desired: &Snapshot, out: &mut Vec<Step>) {
    for (i, g) in desired.grants.iter().enumerate() {
        if !current.grants.contains(g) {
            let name = format!("{} {} {}", g.role, g.action, g.target());
            out.push(step(
                Action::Create,
                "grant",
                name,
                Operation::CreateGrant(g.clone(), format!("grants[{i}]")),
            ));
        }
    }
}

#[cfg(test)]
mod tests;
