//! The steps that make an instance match a snapshot, in the order they run:
//! what refers to something goes before it is dropped and after it is made.

use std::collections::{BTreeMap, BTreeSet};

use kernel::FieldError;
use schema::ColumnPatch;
use serde_json::Value;

use crate::model::{
    Column, Dashboard, DataView, Grant, Index, Resource, Role, Slugged, Snapshot, Table, Workflow,
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
    Expose(Resource),
    /// Creates or changes a workflow.
    PutWorkflow(Workflow, String),
    /// Drops a workflow.
    DropWorkflow(String),
    /// Creates or changes a DataView.
    PutDataView(DataView, String),
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
    /// table, column, index, resource, role, grant, workflow, dataview,
    /// dashboard or setting.
    pub kind: &'static str,
    /// What it changes, by name.
    pub name: String,
    /// Whether it drops a table, a column, a role, a grant or a workflow, or
    /// changes a type.
    pub destructive: bool,
    /// A setting's value before and after, as shown (secrets `[REDACTED]`).
    pub values: Option<(Value, Value)>,
    /// The path of what in it gives administrator power, if anything does
    /// (see [`mark_admin_power`]).
    pub admin_power: Option<String>,
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

/// Settings that decide who may make a credential or where one is sent (a
/// provider's issuer and whether its emails are trusted, where email links
/// point, the origins of passkeys and of redirects after sign-in): any
/// change can hand any account, administrators' included, to whoever they
/// name.
pub const CREDENTIAL_SETTINGS: [&str; 5] = [
    "auth.oauth",
    "auth.email_links_base_url",
    "auth.redirect_allow_list",
    "auth.passkey_rp_id",
    "auth.passkey_origins",
];

/// The names a plan's steps would resolve to give administrator power:
/// the role new accounts get once the plan is applied over `current`
/// (when it sets that role or turns registration on) and the users
/// workflows run as, as written. The store answers which of them are an
/// administrators' role or an active administrator, by the lookup applying
/// them uses.
pub fn admin_candidates(steps: &[Step], current: &Snapshot) -> (Vec<String>, Vec<String>) {
    let (mut roles, mut users) = (Vec::new(), Vec::new());
    for step in steps {
        if opens_registration(step)
            && let Some(role) = registration_role(steps, current)
        {
            roles.push(role.to_owned());
        }
        if let Operation::PutWorkflow(workflow, _) = &step.operation {
            users.extend(
                runs_as(workflow)
                    .into_iter()
                    .map(|(_, user)| user.to_owned()),
            );
        }
    }
    (roles, users)
}

/// Whether `step` sets the role new accounts get or turns registration on.
fn opens_registration(step: &Step) -> bool {
    match &step.operation {
        Operation::SetSetting(key, value) => {
            key == "auth.registration_role_id"
                || (key == "auth.registration_enabled" && value == &Value::Bool(true))
        }
        _ => false,
    }
}

/// The role (by name) new accounts get once `steps` are applied over
/// `current`.
fn registration_role<'a>(steps: &'a [Step], current: &'a Snapshot) -> Option<&'a str> {
    let set = steps.iter().find_map(|step| match &step.operation {
        Operation::SetSetting(key, value) if key == "auth.registration_role_id" => Some(value),
        _ => None,
    });
    set.or_else(|| current.settings.get("auth.registration_role_id"))?
        .as_str()
}

/// Where each definition of `workflow` names the user it runs as.
fn runs_as(workflow: &Workflow) -> Vec<(&'static str, &str)> {
    [
        ("published", workflow.published.as_ref()),
        ("draft", Some(&workflow.draft)),
    ]
    .into_iter()
    .filter_map(|(part, definition)| {
        Some((part, definition?.pointer("/trigger/executeAs")?.as_str()?))
    })
    .collect()
}

/// Marks the steps that give administrator power (API.md 17): a setting
/// that leaves registration open to a role with admin access
/// (`admin_roles`, of the names [`admin_candidates`] found over
/// `current`), a workflow that runs as an administrator (`admin_users`,
/// likewise) and a change to one of [`CREDENTIAL_SETTINGS`]. Snapshots
/// carry neither a role's admin access nor memberships, so no other step
/// can.
pub fn mark_admin_power(
    steps: &mut [Step],
    current: &Snapshot,
    admin_roles: &BTreeSet<String>,
    admin_users: &BTreeSet<String>,
) {
    let admin_registration =
        registration_role(steps, current).is_some_and(|role| admin_roles.contains(role));
    for step in steps.iter_mut() {
        step.admin_power = match &step.operation {
            Operation::SetSetting(key, _) if CREDENTIAL_SETTINGS.contains(&key.as_str()) => {
                Some(format!("settings.{key}"))
            }
            Operation::SetSetting(key, _) if admin_registration && opens_registration(step) => {
                Some(format!("settings.{key}"))
            }
            Operation::PutWorkflow(workflow, path) => runs_as(workflow)
                .into_iter()
                .find(|(_, user)| admin_users.contains(*user))
                .map(|(part, _)| format!("{path}.{part}.trigger.executeAs")),
            _ => None,
        };
    }
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

/// Tables in an order where each comes after the new tables it references.
fn creation_order<'a>(tables: &[&'a Table]) -> Vec<&'a Table> {
    let names: BTreeSet<String> = tables.iter().map(|t| t.qualified()).collect();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    let mut left: Vec<&Table> = tables.to_vec();
    while !left.is_empty() {
        let (ready, waiting): (Vec<&Table>, Vec<&Table>) = left.iter().partition(|t| {
            t.columns
                .iter()
                .filter_map(|c| c.foreign_key.as_ref())
                .all(|fk| {
                    let target = format!("{}.{}", fk.target_schema, fk.target_table);
                    target == t.qualified() || !names.contains(&target) || placed.contains(&target)
                })
        });
        // A cycle: take the rest in name order; the database names the problem.
        let ready = if ready.is_empty() {
            waiting.clone()
        } else {
            ready
        };
        for t in &ready {
            placed.insert(t.qualified());
        }
        left.retain(|t| !placed.contains(&t.qualified()));
        order.extend(ready);
    }
    order
}

/// Steps for tables, columns and indexes; answers the tables created.
fn tables(
    current: &Snapshot,
    desired: &Snapshot,
    middle: &mut Vec<Step>,
    last: &mut Vec<Step>,
) -> Result<BTreeSet<String>, FieldError> {
    let by_name: BTreeMap<String, &Table> =
        current.tables.iter().map(|t| (t.qualified(), t)).collect();
    let index_of: BTreeMap<String, usize> = desired
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.qualified(), i))
        .collect();
    let new: Vec<&Table> = desired
        .tables
        .iter()
        .filter(|t| !by_name.contains_key(&t.qualified()))
        .collect();
    let mut created = BTreeSet::new();
    for t in creation_order(&new) {
        let path = format!("tables[{}]", index_of[&t.qualified()]);
        middle.push(step(
            Action::Create,
            "table",
            t.qualified(),
            Operation::CreateTable(t.clone(), path.clone()),
        ));
        let made: BTreeSet<String> = t
            .columns
            .iter()
            .filter(|c| c.foreign_key.is_some())
            .map(|c| schema::fk_index_name(&t.name, &c.name))
            .collect();
        for (j, index) in t
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, x)| !made.contains(&x.name))
        {
            middle.push(step(
                Action::Create,
                "index",
                format!("{}.{}", t.schema, index.name),
                Operation::CreateIndex(
                    t.schema.clone(),
                    t.name.clone(),
                    index.clone(),
                    format!("{path}.indexes[{j}]"),
                ),
            ));
        }
        created.insert(t.qualified());
    }
    for (i, t) in desired.tables.iter().enumerate() {
        if let Some(c) = by_name.get(&t.qualified()) {
            columns(c, t, &format!("tables[{i}]"), middle, last)?;
        }
    }
    let dropped: Vec<&Table> = current
        .tables
        .iter()
        .filter(|t| !index_of.contains_key(&t.qualified()))
        .collect();
    for t in creation_order(&dropped).into_iter().rev() {
        last.push(step(
            Action::Drop,
            "table",
            t.qualified(),
            Operation::DropTable(t.schema.clone(), t.name.clone()),
        ));
    }
    Ok(created)
}

fn columns(
    current: &Table,
    desired: &Table,
    path: &str,
    middle: &mut Vec<Step>,
    last: &mut Vec<Step>,
) -> Result<(), FieldError> {
    let (schema, table) = (&desired.schema, &desired.name);
    // Indexes go first: one the snapshot drops may block a column's change.
    let wanted: BTreeMap<&str, &Index> = desired
        .indexes
        .iter()
        .map(|x| (x.name.as_str(), x))
        .collect();
    for x in &current.indexes {
        if wanted.get(x.name.as_str()) != Some(&x) {
            middle.push(step(
                Action::Drop,
                "index",
                format!("{schema}.{}", x.name),
                Operation::DropIndex(schema.clone(), x.name.clone()),
            ));
        }
    }
    let mut made = BTreeSet::new();
    for (j, col) in desired.columns.iter().enumerate() {
        let name = format!("{}.{}", desired.qualified(), col.name);
        let at = format!("{path}.columns[{j}]");
        match current.columns.iter().find(|c| c.name == col.name) {
            None => {
                if col.foreign_key.is_some() {
                    made.insert(schema::fk_index_name(table, &col.name));
                }
                middle.push(step(
                    Action::Create,
                    "column",
                    name,
                    Operation::AddColumn(schema.clone(), table.clone(), col.clone(), at),
                ));
            }
            Some(c) => {
                if c.primary_key != col.primary_key
                    || c.identity != col.identity
                    || c.foreign_key != col.foreign_key
                {
                    return Err(FieldError::new(
                        at,
                        "a snapshot does not change a column's primary key, identity or foreign key: drop and add the column",
                    ));
                }
                let patch = ColumnPatch {
                    name: None,
                    data_type: (c.data_type != col.data_type).then(|| col.data_type.clone()),
                    nullable: (c.nullable != col.nullable).then_some(col.nullable),
                    default: (c.default != col.default).then(|| col.default.clone()),
                    check: (c.check != col.check).then(|| col.check.clone()),
                    // A new check takes its message along; a check removed
                    // takes its message with it.
                    check_message: match (c.check != col.check, col.check.is_some()) {
                        (true, true) => Some(col.check_message.clone()),
                        (true, false) => None,
                        (false, _) => (c.check_message != col.check_message)
                            .then(|| col.check_message.clone()),
                    },
                    unique: (c.unique != col.unique).then_some(col.unique),
                };
                if patch != ColumnPatch::default() {
                    middle.push(step(
                        Action::Alter,
                        "column",
                        name,
                        Operation::AlterColumn(
                            schema.clone(),
                            table.clone(),
                            col.name.clone(),
                            patch,
                            at,
                        ),
                    ));
                }
            }
        }
    }
    for (j, x) in desired.indexes.iter().enumerate() {
        let same = current.indexes.iter().any(|c| c == x);
        if !same && !made.contains(&x.name) {
            middle.push(step(
                Action::Create,
                "index",
                format!("{schema}.{}", x.name),
                Operation::CreateIndex(
                    schema.clone(),
                    table.clone(),
                    x.clone(),
                    format!("{path}.indexes[{j}]"),
                ),
            ));
        }
    }
    for c in &current.columns {
        if !desired.columns.iter().any(|d| d.name == c.name) {
            let name = format!("{}.{}", desired.qualified(), c.name);
            last.insert(
                0,
                step(
                    Action::Drop,
                    "column",
                    name,
                    Operation::DropColumn(schema.clone(), table.clone(), c.name.clone()),
                ),
            );
        }
    }
    Ok(())
}

fn resources(
    current: &Snapshot,
    desired: &Snapshot,
    created: &BTreeSet<String>,
    out: &mut Vec<Step>,
) {
    for r in &desired.resources {
        let found = current
            .resources
            .iter()
            .find(|c| c.schema == r.schema && c.table == r.table);
        if found.is_none() && !created.contains(&r.qualified()) {
            out.push(step(
                Action::Create,
                "resource",
                r.qualified(),
                Operation::RegisterResource(r.schema.clone(), r.table.clone()),
            ));
        }
        let exposed = found.map_or(&[][..], |c| c.exposed_methods.as_slice());
        if exposed != r.exposed_methods.as_slice() {
            out.push(step(
                Action::Alter,
                "resource",
                r.qualified(),
                Operation::Expose(r.clone()),
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
        Operation::PutDataView,
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
mod tests {
    use super::*;
    use crate::model::ForeignKey;

    fn col(name: &str, data_type: &str) -> Column {
        Column {
            name: name.into(),
            data_type: data_type.into(),
            nullable: true,
            ..Column::default()
        }
    }

    fn table(name: &str, columns: Vec<Column>) -> Table {
        Table {
            schema: "public".into(),
            name: name.into(),
            columns,
            indexes: Vec::new(),
        }
    }

    fn snapshot(tables: Vec<Table>) -> Snapshot {
        Snapshot {
            version: 1,
            tables,
            ..Snapshot::default()
        }
    }

    #[test]
    fn new_tables_come_after_the_tables_they_reference_and_drops_come_last() {
        let mut item = col("order_id", "bigint");
        item.foreign_key = Some(ForeignKey {
            target_schema: "public".into(),
            target_table: "orders".into(),
            target_column: "id".into(),
            on_delete: "CASCADE".into(),
        });
        let current = snapshot(vec![table("old", vec![col("id", "bigint")])]);
        let desired = snapshot(vec![
            table("items", vec![col("id", "bigint"), item]),
            table("orders", vec![col("id", "bigint")]),
        ]);
        let steps = diff(&current, &desired).unwrap();
        let names: Vec<(&str, &str, &str)> = steps
            .iter()
            .map(|s| (s.action.as_str(), s.kind, s.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("create", "table", "public.orders"),
                ("create", "table", "public.items"),
                ("drop", "table", "public.old"),
            ]
        );
        assert!(steps[2].destructive && !steps[0].destructive);
        assert!(diff(&desired, &desired).unwrap().is_empty());
    }

    #[test]
    fn a_type_change_is_destructive_and_a_key_change_is_refused() {
        let current = snapshot(vec![table(
            "t",
            vec![col("a", "integer"), col("b", "text")],
        )]);
        let mut retyped = current.clone();
        retyped.tables[0].columns[0].data_type = "bigint".into();
        retyped.tables[0].columns[1].nullable = false;
        let steps = diff(&current, &retyped).unwrap();
        assert_eq!(steps.len(), 2);
        assert!(steps[0].destructive);
        assert!(!steps[1].destructive);
        let mut keyed = current.clone();
        keyed.tables[0].columns[1].primary_key = true;
        assert_eq!(
            diff(&current, &keyed).unwrap_err().field,
            "tables[0].columns[1]"
        );
    }
}
