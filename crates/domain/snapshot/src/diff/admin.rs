//! Which steps of a plan can give administrator power, and the marks the
//! diff shows on them.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Operation, Step};
use crate::model::{Snapshot, Workflow};

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
