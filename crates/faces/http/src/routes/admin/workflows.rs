//! Workflows: definitions, publishing, test runs and run history.

use actix_web::{HttpResponse, delete, get, patch, post, web};
use api_types::{
    DataEnvelope, ErrorEnvelope, ManualRunRequest, RunListQuery, SchedulePreview,
    SchedulePreviewRequest, StartedRun, TestRunRequest, Workflow, WorkflowRequest, WorkflowRun,
};
use uuid::Uuid;
use workflows::store::WorkflowRecord;
use workflows::{RunRecord, WorkflowInput};

use crate::AppState;
use crate::convert::{outcome, run_error};
use crate::error::ApiError;
use crate::extract::{AdminPlane, Caller, Data};
use crate::respond::{created, no_content, ok};

fn workflow(record: WorkflowRecord) -> Workflow {
    Workflow {
        id: record.id,
        slug: record.slug,
        name: record.name,
        enabled: record.enabled,
        published: record.published.is_some(),
        published_at: record.published_at,
        trigger: record.draft["trigger"].clone(),
        steps: record.draft["steps"].clone(),
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

fn input(body: WorkflowRequest) -> WorkflowInput {
    WorkflowInput {
        slug: body.slug,
        name: body.name,
        enabled: body.enabled,
        trigger: body.trigger,
        steps: body.steps,
    }
}

/// Every workflow, by name.
#[utoipa::path(tag = "workflows", operation_id = "listWorkflows", security(("bearer" = [])),
    responses((status = 200, description = "The workflows", body = inline(DataEnvelope<Vec<Workflow>>))))]
#[get("/workflows")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
) -> Result<HttpResponse, ApiError> {
    let all = state.services.workflows.list().await?;
    Ok(ok(all.into_iter().map(workflow).collect::<Vec<_>>()))
}

/// Creates a workflow's draft (publish it to run it).
#[utoipa::path(tag = "workflows", operation_id = "createWorkflow", security(("bearer" = [])), request_body = inline(DataEnvelope<WorkflowRequest>),
    responses((status = 201, description = "The workflow", body = inline(DataEnvelope<Workflow>)),
        (status = 400, description = "Invalid definition", body = ErrorEnvelope),
        (status = 409, description = "Slug taken", body = ErrorEnvelope)))]
#[post("/workflows")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    body: Data<WorkflowRequest>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .workflows
        .create(&caller.principal, input(body.0), caller.ip())
        .await?;
    Ok(created(workflow(record)))
}

/// One workflow (its draft, and whether it is published).
#[utoipa::path(tag = "workflows", operation_id = "getWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The workflow", body = inline(DataEnvelope<Workflow>)),
        (status = 404, description = "No such workflow", body = ErrorEnvelope)))]
#[get("/workflows/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    Ok(ok(workflow(
        state.services.workflows.get(id.into_inner()).await?,
    )))
}

/// Changes the draft, name, slug or enabled flag; the published version
/// changes only on publish.
#[utoipa::path(tag = "workflows", operation_id = "updateWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = inline(DataEnvelope<WorkflowRequest>),
    responses((status = 200, description = "The workflow", body = inline(DataEnvelope<Workflow>)),
        (status = 400, description = "Invalid definition", body = ErrorEnvelope),
        (status = 404, description = "No such workflow", body = ErrorEnvelope)))]
#[patch("/workflows/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<WorkflowRequest>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .workflows
        .update(
            &caller.principal,
            id.into_inner(),
            input(body.0),
            caller.ip(),
        )
        .await?;
    Ok(ok(workflow(record)))
}

/// Deletes a workflow with its grants and runs.
#[utoipa::path(tag = "workflows", operation_id = "deleteWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such workflow", body = ErrorEnvelope)))]
#[delete("/workflows/{id}")]
pub async fn remove(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    state
        .services
        .workflows
        .delete(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(no_content())
}

/// Copies the draft to the published version, which webhooks and events run.
#[utoipa::path(tag = "workflows", operation_id = "publishWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    responses((status = 200, description = "The workflow", body = inline(DataEnvelope<Workflow>)),
        (status = 400, description = "The draft is no longer valid", body = ErrorEnvelope),
        (status = 404, description = "No such workflow", body = ErrorEnvelope)))]
#[post("/workflows/{id}/publish")]
pub async fn publish(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .workflows
        .publish(&caller.principal, id.into_inner(), caller.ip())
        .await?;
    Ok(ok(workflow(record)))
}

/// Runs the draft synchronously in test mode with the trigger input `{ query, body, meta }`.
#[utoipa::path(tag = "workflows", operation_id = "testWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = inline(DataEnvelope<TestRunRequest>),
    responses((status = 200, description = "The run outcome with its steps and their logs", body = inline(DataEnvelope<api_types::TestRunOutcome>)),
        (status = 404, description = "No such workflow", body = ErrorEnvelope),
        (status = 504, description = "The run did not finish within workflows.max_sync_wait_ms", body = ErrorEnvelope)))]
#[post("/workflows/{id}/test")]
pub async fn test(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<TestRunRequest>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let mut input = serde_json::Map::new();
    for (key, value) in [("query", b.query), ("body", b.body), ("meta", b.meta)] {
        if let Some(value) = value {
            input.insert(key.into(), value);
        }
    }
    let workflow = id.into_inner();
    let tested = state
        .services
        .workflows
        .test(&caller.principal, workflow, input.into())
        .await?;
    // The run is stored once it ends: its steps are among the newest.
    let recent = state.services.workflows.runs(workflow, 20, 0).await?;
    let steps = recent
        .into_iter()
        .find(|r| r.id == tested.id)
        .map(|r| run(r).steps)
        .unwrap_or_default();
    Ok(ok(api_types::TestRunOutcome {
        outcome: outcome(tested),
        steps,
    }))
}

/// The workflow's runs, newest first, with their stored (redacted) input and each step.
#[utoipa::path(tag = "workflows", operation_id = "listWorkflowRuns", security(("bearer" = [])), params(("id" = Uuid, Path), RunListQuery),
    responses((status = 200, description = "The runs", body = inline(DataEnvelope<Vec<WorkflowRun>>)),
        (status = 400, description = "Bad limit", body = ErrorEnvelope),
        (status = 404, description = "No such workflow", body = ErrorEnvelope)))]
#[get("/workflows/{id}/runs")]
pub async fn runs(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    query: web::Query<RunListQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = super::page_limit(Some(query.limit.unwrap_or(50)))?;
    let runs = state
        .services
        .workflows
        .runs(id.into_inner(), limit, super::page_offset(query.offset)?)
        .await?;
    let runs: Vec<WorkflowRun> = runs.into_iter().map(run).collect();
    Ok(ok(runs))
}

/// A run as the Admin API shows it.
fn run(r: RunRecord) -> WorkflowRun {
    WorkflowRun {
        id: r.id,
        workflow_id: r.workflow_id,
        status: r.status.as_str().to_owned(),
        test: r.test,
        input: r.input,
        result: r.result,
        error: r.error.map(run_error),
        started_at: r.started_at,
        finished_at: r.finished_at,
        steps: r
            .steps
            .into_iter()
            .map(|s| api_types::RunStep {
                id: s.id,
                kind: s.kind,
                status: s.status.as_str().to_owned(),
                result: s.result,
                error: s.error.map(run_error),
                started_at: s.started_at,
                finished_at: s.finished_at,
                iteration: s.iteration,
                attempts: s
                    .attempts
                    .into_iter()
                    .map(|a| api_types::RunAttempt {
                        started_at: a.started_at,
                        finished_at: a.finished_at,
                        error: a.error.map(run_error),
                    })
                    .collect(),
                child_run_id: s.child_run_id,
                logs: s.logs,
            })
            .collect(),
        parent_run_id: r.parent_run_id,
        scheduled_at: r.scheduled_at,
    }
}

/// 202 `{ data: { run } }`.
fn started(record: RunRecord) -> HttpResponse {
    HttpResponse::Accepted().json(DataEnvelope {
        data: StartedRun { run: run(record) },
    })
}

/// Starts a run of the published version as the administrator, with `start.data = input`.
#[utoipa::path(tag = "workflows", operation_id = "runWorkflow", security(("bearer" = [])), params(("id" = Uuid, Path)),
    request_body = inline(DataEnvelope<ManualRunRequest>),
    responses((status = 202, description = "The run, started", body = inline(DataEnvelope<StartedRun>)),
        (status = 404, description = "No such workflow", body = ErrorEnvelope),
        (status = 409, description = "Never published, or disabled", body = ErrorEnvelope)))]
#[post("/workflows/{id}/run")]
pub async fn run_now(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    id: web::Path<Uuid>,
    body: Data<ManualRunRequest>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .services
        .workflows
        .run_manually(&caller.principal, id.into_inner(), body.0.input)
        .await?;
    Ok(started(record))
}

/// Starts a run of the current published version with a stored run's (redacted) input.
#[utoipa::path(tag = "workflows", operation_id = "replayWorkflowRun", security(("bearer" = [])),
    params(("id" = Uuid, Path), ("runId" = Uuid, Path)),
    responses((status = 202, description = "The new run, started", body = inline(DataEnvelope<StartedRun>)),
        (status = 404, description = "No such workflow or run", body = ErrorEnvelope),
        (status = 409, description = "Never published, or disabled", body = ErrorEnvelope)))]
#[post("/workflows/{id}/runs/{runId}/replay")]
pub async fn replay(
    state: web::Data<AppState>,
    caller: Caller<AdminPlane>,
    path: web::Path<(Uuid, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, run_id) = path.into_inner();
    let run_id = Uuid::parse_str(&run_id).map_err(|_| workflows::WorkflowError::RunNotFound)?;
    let record = state
        .services
        .workflows
        .replay(&caller.principal, id, run_id)
        .await?;
    Ok(started(record))
}

/// The next five ticks of a schedule trigger, checked as when saved.
#[utoipa::path(tag = "workflows", operation_id = "previewWorkflowSchedule", security(("bearer" = [])),
    request_body = inline(DataEnvelope<SchedulePreviewRequest>),
    responses((status = 200, description = "The next ticks", body = inline(DataEnvelope<SchedulePreview>)),
        (status = 400, description = "A bad expression or zone", body = ErrorEnvelope)))]
#[post("/workflows/schedule-preview")]
pub async fn schedule_preview(
    state: web::Data<AppState>,
    _caller: Caller<AdminPlane>,
    body: Data<SchedulePreviewRequest>,
) -> Result<HttpResponse, ApiError> {
    let next = state
        .services
        .workflows
        .preview_schedule(&body.0.trigger, 5)
        .await?;
    Ok(ok(SchedulePreview { next }))
}
