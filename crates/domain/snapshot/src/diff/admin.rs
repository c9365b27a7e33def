//! Which steps of a plan can give administrator power, and the marks the
//! diff shows on them, each with its reason.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

use super::{Operation, Step};
use crate::model::{Resource, Snapshot, Workflow};

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

/// The schema of the service tables.
const SERVICE_SCHEMA: &str = "svc";

/// Service tables whose rows give administrator power: exposing them for a
/// write lets any run acting as an administrator make one.
const POWER_TABLES: [&str; 2] = ["roles", "role_members"];

/// Methods that write.
const WRITE_METHODS: [&str; 3] = ["POST", "PATCH", "DELETE"];

/// Triggers whose runs act as the longest-standing administrator when they
/// name no `executeAs` (docs/workflows.md).
const ADMIN_BY_DEFAULT: [&str; 2] = ["dbEvent", "schedule"];

/// Why a step gives administrator power: where in the snapshot, and what
/// the console shows beside the mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminPower {
    /// The path in the snapshot (a refusal's `field`).
    pub field: String,
    /// The reason, in words.
    pub reason: String,
}

/// The names a plan's steps would resolve to give administrator power:
/// the role new accounts get once the plan is applied over `current`
/// (when it sets that role or turns registration on) and the users the
/// workflows of the plan and of `current` run as, as written. The store
/// answers which of them are an administrators' role or an active
/// administrator, by the lookup applying them uses.
pub fn admin_candidates(steps: &[Step], current: &Snapshot) -> (Vec<String>, Vec<String>) {
    let mut roles = Vec::new();
    for step in steps {
        if opens_registration(step)
            && let Some(role) = registration_role(steps, current)
        {
            roles.push(role.to_owned());
        }
    }
    let users = workflows(steps, current)
        .values()
        .flatten()
        .flat_map(|workflow| definitions(workflow))
        .filter_map(|(_, definition)| execute_as(definition))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
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

/// Every workflow of the plan and of `current`, by slug: the plan's
/// definition and the target's both count (a caller already on the target
/// reaches a workflow the plan changes).
fn workflows<'a>(steps: &'a [Step], current: &'a Snapshot) -> BTreeMap<&'a str, Vec<&'a Workflow>> {
    let mut all: BTreeMap<&str, Vec<&Workflow>> = BTreeMap::new();
    let planned = steps.iter().filter_map(|step| match &step.operation {
        Operation::PutWorkflow(workflow, _) => Some(workflow),
        _ => None,
    });
    for workflow in planned.chain(&current.workflows) {
        all.entry(workflow.slug.as_str())
            .or_default()
            .push(workflow);
    }
    all
}

/// A workflow's definitions that can run: published and draft (a test run
/// executes the draft as its `executeAs`).
fn definitions(workflow: &Workflow) -> Vec<(&'static str, &Value)> {
    [
        ("published", workflow.published.as_ref()),
        ("draft", Some(&workflow.draft)),
    ]
    .into_iter()
    .filter_map(|(part, definition)| Some((part, definition?)))
    .collect()
}

/// The user a definition's trigger names, as written.
fn execute_as(definition: &Value) -> Option<&str> {
    definition.pointer("/trigger/executeAs")?.as_str()
}

/// How the runs of `definition` act as an administrator on their own: the
/// trigger's field and the reason.
fn runs_as_admin(
    definition: &Value,
    admin_users: &BTreeSet<String>,
) -> Option<(&'static str, String)> {
    match execute_as(definition) {
        Some(user) if admin_users.contains(user) => Some((
            "trigger.executeAs",
            format!("its runs act as {user}, an administrator"),
        )),
        Some(_) => None,
        None => {
            let kind = definition.pointer("/trigger/type")?.as_str()?;
            ADMIN_BY_DEFAULT.contains(&kind).then(|| {
                (
                    "trigger",
                    format!(
                        "a {kind} trigger without executeAs runs as the longest-standing administrator"
                    ),
                )
            })
        }
    }
}

/// The slugs the `call` steps of `definition` name, at any depth.
fn called(definition: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    let mut lists: Vec<&Value> = vec![definition];
    while let Some(node) = lists.pop() {
        let Value::Object(map) = node else { continue };
        for key in ["steps", "then", "else", "onError"] {
            if let Some(Value::Array(steps)) = map.get(key) {
                for step in steps {
                    if step.get("type").and_then(Value::as_str) == Some("call")
                        && let Some(slug) = step.get("workflow").and_then(Value::as_str)
                    {
                        found.push(slug);
                    }
                    lists.push(step);
                }
            }
        }
    }
    found
}

/// The workflows whose runs can act as an administrator, by slug, with the
/// reason: those that do on their own, and those they reach through
/// `call` steps (a called workflow runs as its caller's user).
fn admin_workflows(
    all: &BTreeMap<&str, Vec<&Workflow>>,
    admin_users: &BTreeSet<String>,
) -> BTreeMap<String, Reached> {
    let mut reached: BTreeMap<String, Reached> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for (slug, versions) in all {
        let own = versions
            .iter()
            .flat_map(|w| definitions(w))
            .find_map(|(part, d)| runs_as_admin(d, admin_users).map(|(f, r)| (part, f, r)));
        if let Some((part, field, reason)) = own {
            reached.insert(
                (*slug).to_owned(),
                Reached::Own(format!("{part}.{field}"), reason),
            );
            queue.push_back(*slug);
        }
    }
    while let Some(caller) = queue.pop_front() {
        let callees: Vec<&str> = all[caller]
            .iter()
            .flat_map(|w| definitions(w))
            .flat_map(|(_, d)| called(d))
            .collect();
        for callee in callees {
            if !reached.contains_key(callee) {
                reached.insert(callee.to_owned(), Reached::Called(caller.to_owned()));
                if all.contains_key(callee) {
                    queue.push_back(callee);
                }
            }
        }
    }
    reached
}

/// How a workflow's runs come to act as an administrator.
enum Reached {
    /// Its own trigger: the field under the definition, and the reason.
    Own(String, String),
    /// A `call` step of this workflow, which acts as one.
    Called(String),
}

/// The mark of an exposure of one of [`POWER_TABLES`] for a write.
fn exposes_power(resource: &Resource, path: &str) -> Option<AdminPower> {
    let table = resource.table.to_lowercase();
    if resource.schema.to_lowercase() != SERVICE_SCHEMA || !POWER_TABLES.contains(&table.as_str()) {
        return None;
    }
    let writes: Vec<&str> = resource
        .exposed_methods
        .iter()
        .map(String::as_str)
        .filter(|m| WRITE_METHODS.iter().any(|w| w.eq_ignore_ascii_case(m)))
        .collect();
    (!writes.is_empty()).then(|| AdminPower {
        field: format!("{path}.exposedMethods"),
        reason: format!(
            "exposes svc.{table} for {}: a run acting as an administrator can then make one",
            writes.join(", ")
        ),
    })
}

/// Marks the steps that give administrator power (API.md 17 and 21): a
/// setting that leaves registration open to a role with admin access
/// (`admin_roles`, of the names [`admin_candidates`] found over
/// `current`), a change to one of [`CREDENTIAL_SETTINGS`], a workflow
/// whose runs can act as an administrator (its `executeAs` is one of
/// `admin_users`, a database-event or schedule trigger names nobody, or
/// such a workflow, in the plan or on the target, reaches it through
/// `call` steps), a grant to start a workflow that acts as one on its own
/// (a called one runs as its starter when started directly), and an
/// exposure of `svc.roles` or `svc.role_members` for a write. Snapshots carry neither a role's admin access nor
/// memberships, so no other step can.
pub fn mark_admin_power(
    steps: &mut [Step],
    current: &Snapshot,
    admin_roles: &BTreeSet<String>,
    admin_users: &BTreeSet<String>,
) {
    let admin_registration =
        registration_role(steps, current).is_some_and(|role| admin_roles.contains(role));
    let reached = admin_workflows(&workflows(steps, current), admin_users);
    let marks: Vec<Option<AdminPower>> = steps
        .iter()
        .map(|step| match &step.operation {
            Operation::SetSetting(key, _) if CREDENTIAL_SETTINGS.contains(&key.as_str()) => {
                Some(AdminPower {
                    field: format!("settings.{key}"),
                    reason: format!("{key} decides who may sign in, administrators included"),
                })
            }
            Operation::SetSetting(key, _) if admin_registration && opens_registration(step) => {
                Some(AdminPower {
                    field: format!("settings.{key}"),
                    reason: "new accounts get a role with admin access".into(),
                })
            }
            Operation::PutWorkflow(workflow, path) => {
                reached
                    .get(&workflow.slug)
                    .map(|reach| match reach {
                        Reached::Own(field, reason) => AdminPower {
                            field: format!("{path}.{field}"),
                            reason: reason.clone(),
                        },
                        Reached::Called(caller) => AdminPower {
                            field: format!("{path}.slug"),
                            reason: format!(
                                "workflow {caller} calls it and acts as an administrator: it runs as one"
                            ),
                        },
                    })
            }
            Operation::Expose(resource, path) => exposes_power(resource, path),
            Operation::CreateGrant(grant, path) => grant
                .workflow
                .as_deref()
                .filter(|slug| matches!(reached.get(*slug), Some(Reached::Own(..))))
                .map(|slug| AdminPower {
                    field: path.clone(),
                    reason: format!(
                        "lets {} start workflow {slug}, whose runs act as an administrator",
                        grant.role
                    ),
                }),
            _ => None,
        })
        .collect();
    for (step, mark) in steps.iter_mut().zip(marks) {
        step.admin_power = mark;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::diff::diff;
    use crate::model::Grant;

    fn workflow(slug: &str, trigger: Value, steps: Value) -> Workflow {
        let definition = json!({ "trigger": trigger, "steps": steps });
        Workflow {
            slug: slug.into(),
            name: slug.into(),
            enabled: true,
            draft: definition.clone(),
            published: Some(definition),
        }
    }

    fn marked(current: &Snapshot, desired: &Snapshot) -> Vec<(String, Option<String>)> {
        let mut steps = diff(current, desired).unwrap();
        let admins = BTreeSet::from(["admin@x.test".to_owned()]);
        mark_admin_power(&mut steps, current, &BTreeSet::new(), &admins);
        steps
            .into_iter()
            .map(|s| (s.name, s.admin_power.map(|p| p.field)))
            .collect()
    }

    fn snapshot(workflows: Vec<Workflow>, resources: Vec<Resource>) -> Snapshot {
        Snapshot {
            version: 1,
            workflows,
            resources,
            ..Snapshot::default()
        }
    }

    #[test]
    fn runs_that_act_as_an_administrator_are_marked_and_others_are_not() {
        let event = |who: Option<&str>| {
            let mut trigger =
                json!({ "type": "dbEvent", "resource": "app.t", "events": ["insert"] });
            if let Some(who) = who {
                trigger["executeAs"] = json!(who);
            }
            trigger
        };
        let desired = snapshot(
            vec![
                workflow("as-nobody", event(None), json!([])),
                workflow("as-person", event(Some("person@x.test")), json!([])),
                workflow("as-admin", event(Some("admin@x.test")), json!([])),
                workflow(
                    "hook",
                    json!({ "type": "webhook", "access": "user" }),
                    json!([]),
                ),
            ],
            Vec::new(),
        );
        assert_eq!(
            marked(&Snapshot::default(), &desired),
            [
                (
                    "as-nobody".into(),
                    Some("workflows[0].published.trigger".into())
                ),
                ("as-person".into(), None),
                (
                    "as-admin".into(),
                    Some("workflows[2].published.trigger.executeAs".into())
                ),
                ("hook".into(), None),
            ]
        );
    }

    #[test]
    fn a_called_workflow_is_marked_only_when_an_administrators_workflow_reaches_it() {
        let call = |slug: &str| {
            json!([{ "id": "c", "type": "condition", "if": {}, "then": [
            { "id": "x", "type": "call", "workflow": slug }], "else": [] }])
        };
        let hook = json!({ "type": "webhook", "access": "user" });
        let admin = json!({ "type": "webhook", "access": "user", "executeAs": "admin@x.test" });
        // The callers are on the target; the plan changes the called ones.
        let current = snapshot(
            vec![
                workflow("admins", admin.clone(), call("child")),
                workflow("child", hook.clone(), json!([])),
                workflow("grandchild", hook.clone(), json!([])),
                workflow("other", hook.clone(), json!([])),
                workflow("users", hook.clone(), call("other")),
            ],
            Vec::new(),
        );
        let mut desired = current.clone();
        desired.workflows[1] = workflow("child", hook.clone(), call("grandchild"));
        desired.workflows[2].name = "changed".into();
        desired.workflows[3].name = "changed".into();
        assert_eq!(
            marked(&current, &desired),
            [
                ("child".into(), Some("workflows[1].slug".into())),
                ("grandchild".into(), Some("workflows[2].slug".into())),
                ("other".into(), None),
            ]
        );
    }

    #[test]
    fn a_grant_to_start_a_workflow_acting_as_an_administrator_is_marked() {
        let hook = json!({ "type": "webhook", "access": "user" });
        let admin = json!({ "type": "webhook", "access": "user", "executeAs": "admin@x.test" });
        let calls = json!([{ "id": "c", "type": "call", "workflow": "child" }]);
        let current = snapshot(
            vec![
                workflow("admins", admin, calls),
                workflow("child", hook, json!([])),
            ],
            Vec::new(),
        );
        let invoke = |slug: &str| Grant {
            role: "staff".into(),
            workflow: Some(slug.into()),
            action: "invoke".into(),
            ..Grant::default()
        };
        let mut desired = current.clone();
        desired.grants = vec![invoke("admins"), invoke("child")];
        assert_eq!(
            marked(&current, &desired),
            [
                (
                    "staff invoke workflow admins".into(),
                    Some("grants[0]".into())
                ),
                ("staff invoke workflow child".into(), None),
            ]
        );
    }

    #[test]
    fn exposing_the_role_tables_for_a_write_is_marked() {
        let exposed = |table: &str, methods: &[&str]| Resource {
            schema: "svc".into(),
            table: table.into(),
            exposed_methods: methods.iter().map(|m| (*m).to_owned()).collect(),
        };
        let current = snapshot(
            Vec::new(),
            vec![
                exposed("role_members", &[]),
                exposed("roles", &[]),
                exposed("users", &[]),
            ],
        );
        let desired = snapshot(
            Vec::new(),
            vec![
                exposed("role_members", &["GET", "POST"]),
                exposed("roles", &["GET"]),
                exposed("users", &["GET"]),
            ],
        );
        assert_eq!(
            marked(&current, &desired),
            [
                (
                    "svc.role_members".into(),
                    Some("resources[0].exposedMethods".into())
                ),
                ("svc.roles".into(), None),
                ("svc.users".into(), None),
            ]
        );
    }
}
