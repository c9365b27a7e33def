//! A host that serves no HTTP: a back-office job that calls Tessera's
//! domain services directly and runs the background workers itself.
//!
//! - [`report`] reads rows as a token's owner, under exactly the grants and
//!   row filters the Data API applies;
//! - [`invite`] invites a person, whose email the workers send;
//! - [`schedule`] publishes a workflow that the workers run on a schedule.
//!
//! It links `tessera-services` alone, so no web framework comes with it
//! (`cargo xtask lint` checks that). docs/embedding.md walks through it.

use anyhow::Context;
use serde_json::{Value, json};
use services::Services;
use services::auth::InviteRequest;
use services::data::{DataRequest, ListParams};
use services::permissions::{Plane, Principal};
use services::workflows::WorkflowInput;
use uuid::Uuid;

/// The rows of `schema.table` that the owner of `token` may read, newest
/// `id` first, at most `limit` of them.
pub async fn report(
    services: &Services,
    token: &str,
    (schema, table): (&str, &str),
    limit: u32,
) -> anyhow::Result<Vec<Value>> {
    let as_owner = DataRequest {
        bearer: token,
        zone_header: None,
        ip: None,
    };
    let params = ListParams {
        sort: Some("-id".into()),
        limit: Some(limit.to_string()),
        ..ListParams::default()
    };
    let page = services.data.list(as_owner, schema, table, &params).await?;
    Ok(serde_json::from_str(&page.rows)?)
}

/// Invites `email` on behalf of the administrator `admin` (a session or
/// an Admin API token): the invitation goes to the outbox in the same
/// transaction, and the email worker sends it.
pub async fn invite(services: &Services, admin: &str, email: &str) -> anyhow::Result<()> {
    let caller = administrator(services, admin).await?;
    let request = InviteRequest {
        email: email.to_owned(),
        name: None,
        role_ids: Vec::new(),
    };
    services.accounts.invite(&caller, request, None).await?;
    Ok(())
}

/// Creates and publishes, on behalf of the administrator `admin`, the
/// workflow `slug` that the workflow worker runs at each tick of `cron`
/// (six fields, seconds first, in UTC) as that administrator; each run
/// answers the time it was scheduled for. Answers the workflow's id.
pub async fn schedule(
    services: &Services,
    admin: &str,
    slug: &str,
    cron: &str,
) -> anyhow::Result<Uuid> {
    let caller = administrator(services, admin).await?;
    let input = WorkflowInput {
        slug: Some(slug.to_owned()),
        trigger: Some(json!({ "type": "schedule", "cron": cron, "timezone": "UTC",
                              "executeAs": caller.user_id })),
        steps: Some(json!([{ "id": "tick", "type": "finish",
                             "result": "{{start.data.scheduledAt}}" }])),
        ..WorkflowInput::default()
    };
    let created = services.workflows.create(&caller, input, None).await?;
    services
        .workflows
        .publish(&caller, created.id, None)
        .await?;
    Ok(created.id)
}

/// The caller `bearer` stands for, when it may use the Admin API.
async fn administrator(services: &Services, bearer: &str) -> anyhow::Result<Principal> {
    let caller = services.sign_in.authenticate(bearer).await?;
    caller
        .authorize(Plane::Admin, false)
        .context("only an administrator may do this")?;
    Ok(caller)
}
