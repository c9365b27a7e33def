//! Workflows end to end: definitions, publishing, webhooks (sync, async,
//! public, authenticated), the result route, timeouts, the rate limit,
//! redacted history, data steps, database events and the http step.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::data::{create_role, create_table, expose, grant, member};

/// The administrator's user id.
pub(crate) async fn admin_id(app: &TestApp, admin: &str) -> String {
    app.get("/api/auth/me", admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Creates and publishes a workflow; answers its id.
pub(crate) async fn published(
    app: &TestApp,
    admin: &str,
    slug: &str,
    trigger: Value,
    steps: Value,
) -> String {
    let created = app
        .post(
            "/admin/api/workflows",
            admin,
            json!({ "data": { "slug": slug, "name": slug, "trigger": trigger, "steps": steps } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.data()["id"].as_str().unwrap().to_owned();
    let publish = app
        .post(
            &format!("/admin/api/workflows/{id}/publish"),
            admin,
            json!(null),
        )
        .await;
    assert_eq!(publish.status, StatusCode::OK, "{:?}", publish.body);
    id
}

/// Calls a webhook with an optional bearer and raw body.
async fn call(
    app: &TestApp,
    method: Method,
    slug: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let mut request = app
        .client
        .request(
            method,
            format!("{}/api/workflows/{slug}/webhook?a=1&b=x&b=y", app.address),
        )
        .header("x-api-key", "secret-key")
        .header("x-trace", "t1")
        .header("x-forwarded-for", "203.0.113.9");
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    TestApp::answer(request.send().await.unwrap()).await
}

fn echo_steps() -> Value {
    json!([
        { "id": "greet", "type": "transform", "output": { "hello": "{{start.data.body.name}}", "b": "{{start.data.query.b}}" } },
        { "id": "done", "type": "finish", "result": "{{steps.greet.result}}" }
    ])
}

/// Polls the result route until the run leaves RUNNING.
async fn settled(app: &TestApp, bearer: &str, run: &str) -> Answer {
    for _ in 0..100 {
        let answer = app
            .get(&format!("/api/workflows/runs/{run}/result"), bearer)
            .await;
        if answer.data()["status"] != "RUNNING" {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} stayed RUNNING");
}

/// The workflow's runs, as the history lists them.
pub(crate) async fn history(app: &TestApp, admin: &str, workflow: &str) -> Vec<Value> {
    let answer = app
        .get(&format!("/admin/api/workflows/{workflow}/runs"), admin)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer.data().as_array().unwrap().clone()
}

/// The history once its newest run has ended.
async fn ended(app: &TestApp, admin: &str, workflow: &str) -> Vec<Value> {
    for _ in 0..100 {
        let runs = history(app, admin, workflow).await;
        if runs[0]["status"] != "RUNNING" {
            return runs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the newest run of {workflow} stayed RUNNING");
}

#[tokio::test]
async fn a_public_sync_webhook_answers_per_the_spec_and_keeps_a_redacted_history() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let trigger = json!({ "type": "webhook", "access": "public", "executeAs": me });

    let draft = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "echo", "trigger": trigger, "steps": echo_steps() } }),
        )
        .await;
    assert_eq!(draft.status, StatusCode::CREATED, "{:?}", draft.body);
    assert_eq!(draft.data()["published"], false);
    assert_eq!(draft.data()["trigger"]["waitSeconds"], 30);
    let id = draft.data()["id"].as_str().unwrap().to_owned();
    let unpublished = call(&app, Method::POST, "echo", None, Some(r#"{"name":"Ada"}"#)).await;
    assert_eq!(unpublished.status, StatusCode::NOT_FOUND);
    assert_eq!(unpublished.code(), "WORKFLOW_NOT_FOUND");
    app.post(
        &format!("/admin/api/workflows/{id}/publish"),
        &admin,
        json!(null),
    )
    .await;

    let done = call(&app, Method::POST, "echo", None, Some(r#"{"name":"Ada"}"#)).await;
    assert_eq!(done.status, StatusCode::OK, "{:?}", done.body);
    assert_eq!(done.data()["status"], "SUCCEEDED");
    assert_eq!(
        done.data()["result"],
        json!({ "hello": "Ada", "b": ["x", "y"] })
    );
    assert_eq!(done.data()["error"], Value::Null);
    let array = call(&app, Method::POST, "echo", None, Some("[1,2]")).await;
    assert_eq!(array.status, StatusCode::OK);

    for (method, body) in [
        (Method::GET, None),
        (Method::POST, Some("\"text\"")),
        (Method::POST, Some("{bad")),
    ] {
        let refused = call(&app, method.clone(), "echo", None, body).await;
        let (status, code) = if method == Method::GET {
            (StatusCode::NOT_FOUND, "WORKFLOW_NOT_FOUND")
        } else {
            (StatusCode::BAD_REQUEST, "WORKFLOW_WEBHOOK_INVALID_PAYLOAD")
        };
        assert_eq!(
            (refused.status, refused.code()),
            (status, code),
            "{method} {body:?}"
        );
    }
    assert_eq!(
        call(&app, Method::POST, "nope", None, Some("{}"))
            .await
            .code(),
        "WORKFLOW_NOT_FOUND"
    );
    assert_eq!(
        call(&app, Method::PUT, "echo", None, Some("{}"))
            .await
            .code(),
        "WORKFLOW_NOT_FOUND"
    );

    // The draft changes nothing until it is published again.
    let edited = app
        .patch(
            &format!("/admin/api/workflows/{id}"),
            &admin,
            json!({ "data": { "steps": [{ "id": "f", "type": "fail", "code": "NOPE", "message": "no {{start.data.body.name}}" }] } }),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{:?}", edited.body);
    let still = call(&app, Method::POST, "echo", None, Some(r#"{"name":"Bo"}"#)).await;
    assert_eq!(still.data()["result"]["hello"], "Bo");
    let tested = app
        .post(
            &format!("/admin/api/workflows/{id}/test"),
            &admin,
            json!({ "data": { "query": {}, "body": { "name": "Cy" }, "meta": { "ip": "1.1.1.1", "headers": {} } } }),
        )
        .await;
    assert_eq!(tested.status, StatusCode::OK, "{:?}", tested.body);
    assert_eq!(tested.data()["status"], "FAILED");
    assert_eq!(
        tested.data()["error"],
        json!({ "code": "NOPE", "message": "no Cy" })
    );
    app.post(
        &format!("/admin/api/workflows/{id}/publish"),
        &admin,
        json!(null),
    )
    .await;
    let failed = call(&app, Method::POST, "echo", None, Some(r#"{"name":"Di"}"#)).await;
    assert_eq!(failed.status, StatusCode::OK);
    assert_eq!(failed.data()["status"], "FAILED");
    assert_eq!(failed.data()["error"]["code"], "NOPE");

    let disabled = app
        .patch(
            &format!("/admin/api/workflows/{id}"),
            &admin,
            json!({ "data": { "enabled": false } }),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::OK);
    assert_eq!(
        call(&app, Method::POST, "echo", None, Some("{}"))
            .await
            .code(),
        "WORKFLOW_NOT_FOUND"
    );

    let big = format!("{{\"a\":\"{}\"}}", "x".repeat(1_100_000));
    let too_large = call(&app, Method::POST, "nope", None, Some(&big)).await;
    assert_eq!(
        (too_large.status, too_large.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    let lookup = json!([{ "id": "out", "type": "finish", "result": { "body": "{{start.data.body}}", "query": "{{start.data.query}}" } }]);
    let get_trigger =
        json!({ "type": "webhook", "method": "GET", "access": "public", "executeAs": me });
    published(&app, &admin, "lookup", get_trigger, lookup).await;
    let got = call(&app, Method::GET, "lookup", None, None).await;
    assert_eq!(got.status, StatusCode::OK, "{:?}", got.body);
    assert_eq!(
        got.data()["result"],
        json!({ "body": null, "query": { "a": "1", "b": ["x", "y"] } })
    );
    assert_eq!(
        call(&app, Method::POST, "lookup", None, Some("{}"))
            .await
            .code(),
        "WORKFLOW_NOT_FOUND"
    );

    let runs = history(&app, &admin, &id).await;
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[0]["status"], "FAILED");
    assert_eq!(runs[1]["test"], true);
    let first = runs.last().unwrap();
    assert_eq!(first["input"]["body"], json!({ "name": "Ada" }));
    assert_eq!(first["input"]["meta"]["headers"]["x-api-key"], "[REDACTED]");
    assert_eq!(first["input"]["meta"]["headers"]["x-trace"], "t1");
    assert_eq!(
        first["input"]["meta"]["ip"], "127.0.0.1",
        "X-Forwarded-For counts only from a trusted proxy"
    );
    assert_eq!(first["steps"].as_array().unwrap().len(), 2);
    assert_eq!(first["steps"][0]["id"], "greet");
    assert_eq!(first["steps"][0]["status"], "SUCCEEDED");
    let stored = app
        .get("/admin/api/audit?action=workflow.publish", &admin)
        .await;
    // Two publishes of `echo` and one of `lookup`.
    assert_eq!(stored.data().as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn definitions_are_checked_when_saved() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    for (data, field) in [
        (
            json!({ "slug": "Bad Slug", "trigger": { "type": "webhook", "access": "authenticated" }, "steps": [] }),
            "slug",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "webhook", "access": "public" }, "steps": [] }),
            "trigger.executeAs",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "webhook", "access": "public", "executeAs": uuid::Uuid::now_v7() }, "steps": [] }),
            "trigger.executeAs",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "webhook", "access": "authenticated", "waitSeconds": 31 }, "steps": [] }),
            "trigger.waitSeconds",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "dbEvent", "resourceId": uuid::Uuid::now_v7(), "events": ["insert"] }, "steps": [] }),
            "trigger.resourceId",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "webhook", "access": "authenticated" }, "steps": [{ "id": "x", "type": "nope" }] }),
            "steps[0].type",
        ),
        (
            json!({ "slug": "a", "trigger": { "type": "webhook", "access": "authenticated" }, "steps": [{ "id": "x", "type": "finish", "result": "{{steps.y.result}}" }] }),
            "steps[0].result",
        ),
    ] {
        let answer = app
            .post("/admin/api/workflows", &admin, json!({ "data": data }))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{data}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["errors"][0]["field"], field, "{data}");
    }
    let ok = json!({ "slug": "taken", "trigger": { "type": "webhook", "access": "authenticated" }, "steps": [] });
    assert_eq!(
        app.post("/admin/api/workflows", &admin, json!({ "data": ok }))
            .await
            .status,
        StatusCode::CREATED
    );
    let twice = app
        .post("/admin/api/workflows", &admin, json!({ "data": ok }))
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    // A lowered maximum refuses the wait when saved; at run time the smaller wins.
    let lowered = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "workflows.max_sync_wait_ms": 5000 } }),
        )
        .await;
    assert_eq!(lowered.status, StatusCode::OK);
    let long = json!({ "slug": "long", "trigger": { "type": "webhook", "access": "authenticated", "waitSeconds": 10 }, "steps": [] });
    let answer = app
        .post("/admin/api/workflows", &admin, json!({ "data": long }))
        .await;
    assert_eq!(answer.body["errors"][0]["field"], "trigger.waitSeconds");
    let unknown = app
        .get(
            &format!("/admin/api/workflows/{}", uuid::Uuid::now_v7()),
            &admin,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get("/admin/api/workflows/not-a-uuid", &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn authenticated_webhooks_need_the_invoke_grant_and_results_follow_the_five_rules() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let role = create_role(&app, &admin, "Callers").await;
    let (_, session) = member(&app, &admin, "caller@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    let (_, other) = member(&app, &admin, "other@example.com", &role).await;
    let steps = json!([
        { "id": "wait", "type": "delay", "ms": 300 },
        { "id": "done", "type": "finish", "result": { "by": "{{user.email}}" } }
    ]);
    let id = published(
        &app,
        &admin,
        "slow",
        json!({ "type": "webhook", "access": "authenticated", "response": "async" }),
        steps,
    )
    .await;

    let anonymous = call(&app, Method::POST, "slow", None, Some("{}")).await;
    assert_eq!(
        (anonymous.status, anonymous.code()),
        (StatusCode::UNAUTHORIZED, "AUTHENTICATION_REQUIRED")
    );
    let denied = call(&app, Method::POST, "slow", Some(&session), Some("{}")).await;
    assert_eq!(
        (denied.status, denied.code()),
        (StatusCode::FORBIDDEN, "ACTION_DENIED")
    );
    let granted = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": role, "workflowId": id, "action": "invoke" } }),
        )
        .await;
    assert_eq!(granted.status, StatusCode::CREATED, "{:?}", granted.body);
    let grant_id = granted.data()["id"].as_str().unwrap().to_owned();
    let document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    let paths = &document.body["paths"];
    assert!(
        paths["/api/workflows/slow/webhook"]["post"]["responses"]["202"].is_object(),
        "{paths}"
    );
    assert!(
        paths["/api/workflows/runs/{id}/result"]["get"].is_object(),
        "{paths}"
    );
    let users = app
        .get(
            &format!("/admin/api/openapi/data?role={}", crate::USERS_ROLE),
            &admin,
        )
        .await;
    assert!(
        users.body["paths"]
            .get("/api/workflows/slow/webhook")
            .is_none()
    );

    let started = call(&app, Method::POST, "slow", Some(&token), Some("{}")).await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{:?}", started.body);
    let run = started.data()["run"].as_str().unwrap().to_owned();
    let running = app
        .get(&format!("/api/workflows/runs/{run}/result"), &session)
        .await;
    assert_eq!(running.status, StatusCode::OK, "{:?}", running.body);
    assert_eq!(running.data()["status"], "RUNNING");
    let finished = settled(&app, &token, &run).await;
    assert_eq!(finished.data()["status"], "SUCCEEDED");
    assert_eq!(
        finished.data()["result"],
        json!({ "by": "caller@example.com" })
    );

    let path = format!("/api/workflows/runs/{run}/result");
    assert_eq!(
        app.get(&path, &other).await.code(),
        "WORKFLOW_RUN_NOT_FOUND"
    );
    // Readable for 24 hours after it finished, not after.
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let age = |hours: i32| {
        format!(
            "UPDATE svc.workflow_runs SET finished_at = now() - interval '{hours} hours' WHERE id = '{run}'"
        )
    };
    sea_orm::ConnectionTrait::execute_unprepared(&db, &age(23))
        .await
        .unwrap();
    assert_eq!(app.get(&path, &session).await.status, StatusCode::OK);
    sea_orm::ConnectionTrait::execute_unprepared(&db, &age(25))
        .await
        .unwrap();
    assert_eq!(
        app.get(&path, &session).await.code(),
        "WORKFLOW_RUN_NOT_FOUND"
    );
    sea_orm::ConnectionTrait::execute_unprepared(&db, &age(0))
        .await
        .unwrap();
    // The Admin API's workflow routes are for administrators only.
    assert_eq!(
        app.get("/admin/api/workflows", &session).await.status,
        StatusCode::FORBIDDEN
    );
    // Execute as, when set, replaces the caller as the run's user.
    let me = admin_id(&app, &admin).await;
    let as_admin = published(
        &app,
        &admin,
        "as-admin",
        json!({ "type": "webhook", "access": "authenticated", "executeAs": me }),
        json!([{ "id": "who", "type": "finish", "result": "{{user.email}}" }]),
    )
    .await;
    app.post(
        "/admin/api/grants",
        &admin,
        json!({ "data": { "roleId": role, "workflowId": as_admin, "action": "invoke" } }),
    )
    .await;
    let ran = call(&app, Method::POST, "as-admin", Some(&session), Some("{}")).await;
    assert_eq!(ran.data()["result"], testkit::ADMIN_EMAIL, "{:?}", ran.body);
    assert_eq!(
        app.call(Method::GET, &path, None, None).await.status,
        StatusCode::UNAUTHORIZED
    );
    for bad in ["not-a-uuid", &uuid::Uuid::now_v7().to_string()] {
        let unknown = app
            .get(&format!("/api/workflows/runs/{bad}/result"), &session)
            .await;
        assert_eq!(
            (unknown.status, unknown.code()),
            (StatusCode::NOT_FOUND, "WORKFLOW_RUN_NOT_FOUND")
        );
    }
    // Without the grant the run is no longer readable, and no call is accepted.
    assert_eq!(
        app.delete(&format!("/admin/api/grants/{grant_id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&path, &session).await.code(),
        "WORKFLOW_RUN_NOT_FOUND"
    );
    assert_eq!(
        call(&app, Method::POST, "slow", Some(&session), Some("{}"))
            .await
            .code(),
        "ACTION_DENIED"
    );
    // Runs of a public webhook have no caller.
    published(
        &app,
        &admin,
        "open",
        json!({ "type": "webhook", "access": "public", "response": "async", "executeAs": me }),
        json!([]),
    )
    .await;
    let public = call(&app, Method::POST, "open", Some(&admin), Some("{}")).await;
    assert_eq!(public.status, StatusCode::ACCEPTED);
    let public_run = public.data()["run"].as_str().unwrap();
    let hidden = app
        .get(&format!("/api/workflows/runs/{public_run}/result"), &admin)
        .await;
    assert_eq!(hidden.code(), "WORKFLOW_RUN_NOT_FOUND");
    // Deleting the workflow takes its grants with it.
    app.post(
        "/admin/api/grants",
        &admin,
        json!({ "data": { "roleId": role, "workflowId": id, "action": "invoke" } }),
    )
    .await;
    assert_eq!(
        app.delete(&format!("/admin/api/workflows/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let grants = app
        .get(&format!("/admin/api/grants?roleId={role}"), &admin)
        .await;
    let left: Vec<&Value> = grants
        .data()
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["workflowId"] == id.as_str())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_sync_wait_past_its_time_answers_504_and_continues_or_cancels() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let steps = json!([
        { "id": "wait", "type": "delay", "ms": 1500 },
        { "id": "done", "type": "finish", "result": "late" }
    ]);
    let mut ids = Vec::new();
    for (slug, on_timeout) in [("keeps-going", "continue"), ("gives-up", "cancel")] {
        let trigger = json!({ "type": "webhook", "access": "public", "executeAs": me, "waitSeconds": 1, "onTimeout": on_timeout });
        ids.push(published(&app, &admin, slug, trigger, steps.clone()).await);
        let timed_out = call(&app, Method::POST, slug, None, Some("{}")).await;
        assert_eq!(
            timed_out.status,
            StatusCode::GATEWAY_TIMEOUT,
            "{:?}",
            timed_out.body
        );
        assert_eq!(timed_out.code(), "WORKFLOW_SYNC_TIMEOUT");
        assert!(timed_out.body["meta"]["run"].is_string());
    }
    let kept = ended(&app, &admin, &ids[0]).await;
    assert_eq!(
        (kept[0]["status"].as_str(), &kept[0]["result"]),
        (Some("SUCCEEDED"), &json!("late"))
    );
    let cancelled = ended(&app, &admin, &ids[1]).await;
    assert_eq!(cancelled[0]["status"], "CANCELLED");
    // The wait is the smaller of waitSeconds and the current maximum.
    let patient =
        json!({ "type": "webhook", "access": "public", "executeAs": me, "waitSeconds": 30 });
    published(&app, &admin, "patient", patient, steps.clone()).await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "workflows.max_sync_wait_ms": 500 } }),
    )
    .await;
    let began = std::time::Instant::now();
    let cut = call(&app, Method::POST, "patient", None, Some("{}")).await;
    assert_eq!(cut.code(), "WORKFLOW_SYNC_TIMEOUT");
    assert!(
        began.elapsed() < Duration::from_millis(1400),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(
        cancelled[0]["steps"][0]["status"], "CANCELLED",
        "{:?}",
        cancelled[0]
    );
    assert!(cancelled[0]["finishedAt"].is_string());
}

#[tokio::test]
async fn public_calls_are_limited_per_address_across_instances() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "workflows.public_rate_limit_per_minute": 3 } }),
    )
    .await;
    published(
        &app,
        &admin,
        "limited",
        json!({ "type": "webhook", "access": "public", "executeAs": me }),
        json!([]),
    )
    .await;
    let peer = app.spawn_peer().await;
    for address in [&app.address, &peer, &app.address] {
        let answer = app
            .client
            .post(format!("{address}/api/workflows/limited/webhook"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
    }
    let refused = app
        .client
        .post(format!("{peer}/api/workflows/limited/webhook"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let refused = TestApp::answer(refused).await;
    assert_eq!(refused.code(), "RATE_LIMIT_EXCEEDED");
}

/// Reads one HTTP request (head and `content-length` body) from `socket`;
/// `None` when the peer closes before it is whole.
pub(crate) async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buffer).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buffer.len() >= end + 4 + length {
                return Some(text);
            }
        }
    }
}

/// A loopback HTTP receiver: answers 200 `{"ok":true}` and keeps each request's body and headers.
async fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                if let Some(text) = read_request(&mut socket).await {
                    keep.lock().unwrap().push(text);
                }
                let body = r#"{"ok":true}"#;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nset-cookie: sid=receiver-session\r\nauthorization: Bearer receiver-secret\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    (address, seen)
}

#[tokio::test]
async fn data_steps_run_under_the_users_grants_and_row_events_call_out_once_each() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let orders = create_table(
        &app,
        &admin,
        "public",
        "orders",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "item", "dataType": "text" },
            { "name": "amount", "dataType": "integer" }
        ]),
    )
    .await;
    expose(&app, &admin, &orders, &["GET", "POST", "PATCH", "DELETE"]).await;
    let role = create_role(&app, &admin, "Clerks").await;
    let (clerk, _) = member(&app, &admin, "clerk@example.com", &role).await;
    grant(
        &app,
        &admin,
        &role,
        &orders,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &orders,
        "read",
        json!({ "amount": { "lt": 100 } }),
        Value::Null,
    )
    .await;
    let me = admin_id(&app, &admin).await;

    // Intake: insert as the clerk, then read back under the clerk's row filter.
    let steps = json!([
        { "id": "add", "type": "insert", "resource": "public.orders", "data": { "item": "{{start.data.body.item}}", "amount": "{{start.data.body.amount}}" } },
        { "id": "small", "type": "query", "resource": "public.orders", "sort": "id", "filter": { "amount": { "gte": 0 } } },
        { "id": "check", "type": "condition", "if": { "start.data.body.amount": { "gt": 100 } },
          "then": [{ "id": "big", "type": "finish", "result": { "big": true, "seen": "{{steps.small.result}}" } }],
          "else": [{ "id": "fine", "type": "finish", "result": { "id": "{{steps.add.result.id}}", "seen": "{{steps.small.result}}" } }] }
    ]);
    published(
        &app,
        &admin,
        "intake",
        json!({ "type": "webhook", "access": "public", "executeAs": clerk }),
        steps,
    )
    .await;
    let small = call(
        &app,
        Method::POST,
        "intake",
        None,
        Some(r#"{"item":"pen","amount":5}"#),
    )
    .await;
    assert_eq!(small.data()["status"], "SUCCEEDED", "{:?}", small.body);
    assert_eq!(small.data()["result"]["id"], 1);
    let big = call(
        &app,
        Method::POST,
        "intake",
        None,
        Some(r#"{"item":"car","amount":500}"#),
    )
    .await;
    assert_eq!(big.data()["result"]["big"], true);
    let seen: Vec<&str> = big.data()["result"]["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["item"].as_str().unwrap())
        .collect();
    assert_eq!(seen, ["pen"], "the row filter hides the car");
    // A write the clerk may not do fails the run with the Data API's code.
    let denied_steps =
        json!([{ "id": "drop", "type": "delete", "resource": "public.orders", "key": 1 }]);
    published(
        &app,
        &admin,
        "purge",
        json!({ "type": "webhook", "access": "public", "executeAs": clerk }),
        denied_steps,
    )
    .await;
    let denied = call(&app, Method::POST, "purge", None, Some("{}")).await;
    assert_eq!(denied.data()["status"], "FAILED");
    assert_eq!(denied.data()["error"]["code"], "PERMISSION_DENIED");

    // Outgoing webhook: every insert, from the Data API or plain SQL, calls the receiver once.
    let (target, received) = receiver().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "workflows.http_allow_private": true } }),
    )
    .await;
    let notify = json!([
        { "id": "send", "type": "http", "method": "POST", "url": format!("{target}/hook"), "signingSecret": "s3cret",
          "body": { "event": "{{start.data.event}}", "item": "{{start.data.new.item}}", "resource": "{{start.data.resource}}" } },
        { "id": "done", "type": "finish", "result": "{{steps.send.result.body}}" }
    ]);
    let hook = published(
        &app,
        &admin,
        "notify",
        json!({ "type": "dbEvent", "resourceId": orders, "events": ["insert"], "executeAs": me }),
        notify,
    )
    .await;
    let clerk_session = app.login("clerk@example.com", "member-password-1").await;
    // A second instance competes for the same events: each still starts one run.
    let _peer = app.spawn_peer().await;
    let via_api = app
        .post(
            "/api/data/public/orders",
            &clerk_session,
            json!({ "data": { "item": "ink", "amount": 7 } }),
        )
        .await;
    assert_eq!(via_api.status, StatusCode::CREATED, "{:?}", via_api.body);
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    sea_orm::ConnectionTrait::execute_unprepared(
        &db,
        "INSERT INTO public.orders (item, amount) VALUES ('tea', 3), ('jam', 4), ('oil', 6)",
    )
    .await
    .unwrap();
    for _ in 0..100 {
        if received.lock().unwrap().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let requests = received.lock().unwrap().clone();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let bodies: Vec<&str> = requests
        .iter()
        .map(|r| r.split("\r\n\r\n").nth(1).unwrap())
        .collect();
    assert!(
        bodies.contains(&r#"{"event":"insert","item":"ink","resource":"public.orders"}"#),
        "{bodies:?}"
    );
    assert!(
        bodies.contains(&r#"{"event":"insert","item":"tea","resource":"public.orders"}"#),
        "{bodies:?}"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.to_ascii_lowercase().contains("tessera-signature: t="))
    );
    let runs = history(&app, &admin, &hook).await;
    assert_eq!(runs.len(), 4);
    assert!(
        runs.iter()
            .all(|r| r["status"] == "SUCCEEDED" && r["result"] == json!({ "ok": true })),
        "{runs:?}"
    );

    // With private targets refused, the same call fails the run.
    let refused = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "workflows.http_allow_private": false } }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::OK, "{:?}", refused.body);
    sea_orm::ConnectionTrait::execute_unprepared(
        &db,
        "INSERT INTO public.orders (item, amount) VALUES ('gum', 1)",
    )
    .await
    .unwrap();
    let mut last = Value::Null;
    for _ in 0..100 {
        let runs = history(&app, &admin, &hook).await;
        if runs.len() == 5 && runs[0]["status"] != "RUNNING" {
            last = runs[0].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last["status"], "FAILED", "{last:?}");
    assert_eq!(last["error"]["code"], "HTTP_TARGET_FORBIDDEN");
    assert_eq!(received.lock().unwrap().len(), 4);
}

/// Sends `request` and reads its JSON answer.
async fn answer_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_run_of_a_killed_process_is_resumed_by_the_next_one() {
    let db = testkit::TestDatabase::create().await;
    let env = [("TESSERA_WORKFLOW_LEASE_SECONDS", "1")];
    let (mut first, base) = crate::binary::serve_with(&db.url, &env).await;
    let client = reqwest::Client::new();
    let login: Value = answer_of(
        client
            .post(format!("{base}/api/auth/login"))
            .json(&json!({ "email": "boot@example.com", "password": "boot-password-1" })),
    )
    .await;
    let admin = login["data"]["token"].as_str().unwrap().to_owned();
    let me: Value = answer_of(
        client
            .get(format!("{base}/api/auth/me"))
            .bearer_auth(&admin),
    )
    .await;
    let steps = json!([
        { "id": "wait", "type": "delay", "ms": 2500 },
        { "id": "done", "type": "finish", "result": "survived" }
    ]);
    let created: Value = answer_of(client
        .post(format!("{base}/admin/api/workflows"))
        .bearer_auth(&admin)
        .json(&json!({ "data": { "slug": "durable", "steps": steps,
            "trigger": { "type": "webhook", "access": "public", "response": "async", "executeAs": me["data"]["id"] } } }))).await;
    let id = created["data"]["id"].as_str().unwrap().to_owned();
    client
        .post(format!("{base}/admin/api/workflows/{id}/publish"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    let started = client
        .post(format!("{base}/api/workflows/durable/webhook"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::ACCEPTED);
    tokio::time::sleep(Duration::from_millis(500)).await;
    first.kill().await.unwrap();

    let (_second, base) = crate::binary::serve_with(&db.url, &env).await;
    let mut last = Value::Null;
    for _ in 0..100 {
        let runs: Value = answer_of(
            client
                .get(format!("{base}/admin/api/workflows/{id}/runs"))
                .bearer_auth(&admin),
        )
        .await;
        last = runs["data"][0].clone();
        if last["status"] != "RUNNING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "SUCCEEDED", "{last:?}");
    assert_eq!(last["result"], "survived");
    assert_eq!(last["steps"][0]["id"], "wait");
    assert_eq!(last["steps"][0]["status"], "SUCCEEDED");
}

#[tokio::test]
async fn finished_runs_are_purged_after_the_retention_days() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let trigger = json!({ "type": "webhook", "access": "public", "executeAs": me });
    let id = published(&app, &admin, "kept", trigger, echo_steps()).await;
    for _ in 0..2 {
        assert_eq!(
            call(&app, Method::POST, "kept", None, Some("{}"))
                .await
                .status,
            StatusCode::OK
        );
    }
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    sea_orm::ConnectionTrait::execute_unprepared(
        &db,
        "UPDATE svc.workflow_runs SET finished_at = now() - interval '31 days' \
         WHERE id = (SELECT id FROM svc.workflow_runs ORDER BY started_at LIMIT 1)",
    )
    .await
    .unwrap();
    app.services.workflows.pass(0).await.unwrap();
    assert_eq!(history(&app, &admin, &id).await.len(), 1);
}

#[tokio::test]
async fn a_run_stores_no_secret_it_received_nor_an_answer_cookie() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let (target, _) = receiver().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "workflows.http_allow_private": true } }),
    )
    .await;
    // Every step copies the caller's credential somewhere.
    let steps = json!([
        { "id": "copy", "type": "transform", "output": {
            "bearer": "{{start.data.meta.headers.authorization}}",
            "key": "key is {{start.data.meta.headers.x-api-key}}" } },
        { "id": "call", "type": "http", "method": "POST", "url": format!("{target}/hook"),
          "body": { "auth": "{{start.data.meta.headers.authorization}}" } },
        { "id": "done", "type": "finish", "result": {
            "seen": "{{steps.copy.result.bearer}}", "cookie": "{{steps.call.result.headers.set-cookie}}" } }
    ]);
    let workflow = published(
        &app,
        &admin,
        "leaky",
        json!({ "type": "webhook", "access": "authenticated", "executeAs": me }),
        steps,
    )
    .await;
    let token = app.create_token(&admin, "API").await;
    let answer = call(
        &app,
        Method::POST,
        "leaky",
        Some(&token),
        Some(r#"{"echo":"x"}"#),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    // The caller's own answer is computed as usual (the steps saw the values).
    assert_eq!(answer.data()["result"]["seen"], format!("Bearer {token}"));
    let runs = ended(&app, &admin, &workflow).await;
    let stored = runs[0].to_string();
    assert!(!stored.contains(&token), "{stored}");
    assert!(!stored.contains("secret-key"), "{stored}");
    assert!(!stored.contains("receiver-session"), "{stored}");
    assert!(!stored.contains("receiver-secret"), "{stored}");
    assert!(stored.contains("[REDACTED]"), "{stored}");
    let call_step = runs[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "call")
        .unwrap()
        .clone();
    assert_eq!(call_step["result"]["headers"]["set-cookie"], "[REDACTED]");
    assert_eq!(call_step["result"]["body"], json!({ "ok": true }));
}

#[tokio::test]
async fn an_event_run_never_falls_back_to_an_administrator_for_an_inactive_user() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let table = create_table(
        &app,
        &admin,
        "public",
        "events_src",
        json!([{ "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
               { "name": "note", "dataType": "text" }]),
    )
    .await;
    let role = create_role(&app, &admin, "Watchers").await;
    let (worker, _) = member(&app, &admin, "worker@example.com", &role).await;
    let workflow = published(
        &app,
        &admin,
        "on-insert",
        json!({ "type": "dbEvent", "resourceId": table, "events": ["insert"], "executeAs": worker }),
        json!([{ "id": "done", "type": "finish", "result": { "as": "{{user.id}}" } }]),
    )
    .await;
    let insert = |note: &'static str| {
        let url = app.db.url.clone();
        async move {
            let db = sea_orm::Database::connect(&url).await.unwrap();
            sea_orm::ConnectionTrait::execute_unprepared(
                &db,
                &format!("INSERT INTO public.events_src (note) VALUES ('{note}')"),
            )
            .await
            .unwrap();
        }
    };
    // Control: the active user's event starts a run as that user.
    insert("first").await;
    let mut runs = Vec::new();
    for _ in 0..100 {
        runs = history(&app, &admin, &workflow).await;
        if runs.first().is_some_and(|r| r["status"] != "RUNNING") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runs[0]["result"]["as"], worker.as_str(), "{runs:?}");
    let off = app
        .patch(
            &format!("/admin/api/users/{worker}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{:?}", off.body);
    insert("second").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let runs = history(&app, &admin, &workflow).await;
    assert_eq!(runs.len(), 1, "no run as an administrator: {runs:?}");
}
