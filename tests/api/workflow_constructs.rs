//! Workflows of API.md 15 through HTTP: schedules, manual runs and
//! replays, `retry` against a loopback receiver that fails a given number
//! of times, `onError`, `forEach` under concurrency, and `call` with its
//! depth and cycle limits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};
use tokio::io::AsyncWriteExt;

use crate::workflows::{admin_id, history, published, read_request};

/// A loopback receiver answering 503 to its first `fails` requests and 200
/// `{"n": <count>}` after; keeps when each request arrived.
pub(crate) async fn flaky(fails: usize) -> (String, Arc<Mutex<Vec<Instant>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let keep = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                if read_request(&mut socket).await.is_none() {
                    return;
                }
                let count = {
                    let mut seen = keep.lock().unwrap();
                    seen.push(Instant::now());
                    seen.len()
                };
                let (status, body) = if count <= fails {
                    ("503 Service Unavailable", r#"{"busy":true}"#.to_owned())
                } else {
                    ("200 OK", format!(r#"{{"n":{count}}}"#))
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    (address, seen)
}

/// Starts a manual run (202) and answers the run as stored once it ended.
async fn run_to_end(app: &TestApp, admin: &str, workflow: &str, input: Value) -> Value {
    let started = app
        .post(
            &format!("/admin/api/workflows/{workflow}/run"),
            admin,
            json!({ "data": { "input": input } }),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{:?}", started.body);
    let run = started.data()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started.data()["run"]["status"], "RUNNING");
    stored_run(app, admin, workflow, &run).await
}

/// The stored run `run` of `workflow`, once ended.
async fn stored_run(app: &TestApp, admin: &str, workflow: &str, run: &str) -> Value {
    for _ in 0..200 {
        let found = history(app, admin, workflow)
            .await
            .into_iter()
            .find(|r| r["id"] == run);
        if let Some(found) = found.filter(|r| r["status"] != "RUNNING") {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} did not end");
}

fn manual() -> Value {
    json!({ "type": "manual" })
}

/// Saving a draft answers 400 INVALID_PAYLOAD naming `field`.
async fn refused(app: &TestApp, admin: &str, trigger: Value, steps: Value, field: &str) {
    let answer = app
        .post(
            "/admin/api/workflows",
            admin,
            json!({ "data": { "slug": "refused", "trigger": trigger, "steps": steps } }),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::BAD_REQUEST,
        "{field}: {:?}",
        answer.body
    );
    assert_eq!(answer.code(), "INVALID_PAYLOAD");
    assert_eq!(
        answer.body["errors"][0]["field"], field,
        "{:?}",
        answer.body
    );
}

#[tokio::test]
async fn every_new_field_is_checked_when_saved() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let finish = json!([{ "id": "f", "type": "finish", "result": 1 }]);
    let schedule = |cron: &str| json!({ "type": "schedule", "cron": cron, "executeAs": me });
    refused(
        &app,
        &admin,
        schedule("61 * * * *"),
        finish.clone(),
        "trigger.cron",
    )
    .await;
    refused(
        &app,
        &admin,
        schedule("* * *"),
        finish.clone(),
        "trigger.cron",
    )
    .await;
    refused(&app, &admin, json!({ "type": "schedule", "cron": "* * * * *", "timezone": "Mars/Olympus", "executeAs": me }),
        finish.clone(), "trigger.timezone").await;
    refused(
        &app,
        &admin,
        json!({ "type": "schedule", "cron": "* * * * *" }),
        finish.clone(),
        "trigger.executeAs",
    )
    .await;
    refused(
        &app,
        &admin,
        json!({ "type": "manual", "cron": "* * * * *" }),
        finish.clone(),
        "trigger.cron",
    )
    .await;
    let step = |extra: Value| {
        let mut step = json!({ "id": "t", "type": "transform", "output": 1 });
        step.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!([step])
    };
    refused(
        &app,
        &admin,
        manual(),
        step(json!({ "retry": { "attempts": 11, "backoffMs": 100 } })),
        "steps[0].retry.attempts",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        step(json!({ "retry": { "attempts": 2, "backoffMs": 99 } })),
        "steps[0].retry.backoffMs",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        step(json!({ "retry": { "attempts": 2, "backoffMs": 100, "factor": 0.5 } })),
        "steps[0].retry.factor",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        step(json!({ "onError": "ignore" })),
        "steps[0].onError",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        step(json!({ "onError": [{ "id": "x", "type": "nothing" }] })),
        "steps[0].onError[0].type",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        json!([{ "id": "each", "type": "forEach", "items": [1], "concurrency": 11, "steps": [] }]),
        "steps[0].concurrency",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        json!([{ "id": "each", "type": "forEach", "items": 3, "steps": [] }]),
        "steps[0].items",
    )
    .await;
    refused(
        &app,
        &admin,
        manual(),
        json!([{ "id": "t", "type": "transform", "output": "{{item}}" }]),
        "steps[0].output",
    )
    .await;
    refused(&app, &admin, manual(),
        json!([{ "id": "each", "type": "forEach", "items": [1], "steps": [{ "id": "in", "type": "transform", "output": 1 }] },
               { "id": "after", "type": "transform", "output": "{{steps.in.result}}" }]), "steps[1].output").await;
    refused(
        &app,
        &admin,
        manual(),
        json!([{ "id": "c", "type": "condition", "if": { "start.data.x": { "eq": 1 } },
                 "then": [{ "id": "sub", "type": "call", "workflow": "nobody" }] }]),
        "steps[0].then[0].workflow",
    )
    .await;
}

#[tokio::test]
async fn retries_wait_their_backoff_and_on_error_handles_the_last_failure() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "workflows.http_allow_private": true } }),
    )
    .await;
    // Two failures, then an answer: the third attempt succeeds.
    let (target, seen) = flaky(2).await;
    let steps = json!([
        { "id": "call", "type": "http", "method": "POST", "url": format!("{target}/x"), "body": {},
          "retry": { "attempts": 3, "backoffMs": 300, "factor": 2 } },
        { "id": "done", "type": "finish", "result": "{{steps.call.result.body}}" }
    ]);
    let id = published(&app, &admin, "partner", manual(), steps).await;
    let run = run_to_end(&app, &admin, &id, json!({})).await;
    assert_eq!(run["status"], "SUCCEEDED", "{run}");
    assert_eq!(run["result"], json!({ "n": 3 }));
    let attempts = run["steps"][0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3, "{run}");
    assert_eq!(attempts[0]["error"]["code"], "HTTP_REQUEST_FAILED");
    assert!(attempts[2]["error"].is_null());
    let at = seen.lock().unwrap().clone();
    assert_eq!(at.len(), 3);
    assert!(
        at[1] - at[0] >= Duration::from_millis(300),
        "{:?}",
        at[1] - at[0]
    );
    assert!(
        at[2] - at[1] >= Duration::from_millis(600),
        "factor 2: {:?}",
        at[2] - at[1]
    );

    // Failing on every attempt: the step fails with HTTP_REQUEST_FAILED,
    // and onError decides what the run does.
    let (down, seen) = flaky(usize::MAX).await;
    let failing = |on_error: Value| {
        let handled = if on_error.is_array() {
            "{{steps.note.result}}"
        } else {
            "no handler"
        };
        json!([
            { "id": "call", "type": "http", "url": format!("{down}/x"),
              "retry": { "attempts": 2, "backoffMs": 100 }, "onError": on_error },
            { "id": "done", "type": "finish", "result": { "error": "{{steps.call.error}}", "result": "{{steps.call.result}}",
                                                          "handled": handled } }
        ])
    };
    let fails = published(&app, &admin, "fails", manual(), failing(json!("fail"))).await;
    let run = run_to_end(&app, &admin, &fails, json!({})).await;
    assert_eq!(run["status"], "FAILED");
    assert_eq!(run["error"]["code"], "HTTP_REQUEST_FAILED");
    assert_eq!(seen.lock().unwrap().len(), 2, "two attempts in all");
    let goes_on = published(
        &app,
        &admin,
        "goes-on",
        manual(),
        failing(json!("continue")),
    )
    .await;
    let run = run_to_end(&app, &admin, &goes_on, json!({})).await;
    assert_eq!(run["status"], "SUCCEEDED", "{run}");
    assert_eq!(run["result"]["error"]["code"], "HTTP_REQUEST_FAILED");
    assert!(run["result"]["result"].is_null());
    assert_eq!(run["steps"][0]["status"], "FAILED");
    let handler = json!([{ "id": "note", "type": "transform", "output": "handled {{steps.call.error.code}}" }]);
    let branches = published(&app, &admin, "branches", manual(), failing(handler)).await;
    let run = run_to_end(&app, &admin, &branches, json!({})).await;
    assert_eq!(run["status"], "SUCCEEDED", "{run}");
    assert_eq!(run["result"]["handled"], "handled HTTP_REQUEST_FAILED");
    // A fail step in the handler fails the run with its code.
    let rethrow = json!([{ "id": "note", "type": "fail", "code": "PARTNER_DOWN", "message": "{{steps.call.error.message}}" }]);
    let rethrows = published(&app, &admin, "rethrows", manual(), failing(rethrow)).await;
    let run = run_to_end(&app, &admin, &rethrows, json!({})).await;
    assert_eq!(run["error"]["code"], "PARTNER_DOWN");
    assert_eq!(seen.lock().unwrap().len(), 8);
}

#[tokio::test]
async fn for_each_keeps_item_order_under_concurrency_and_refuses_bad_items() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // Later items wait less: with five at once they end in reverse order.
    let steps = json!([
        { "id": "each", "type": "forEach", "items": "{{start.data.items}}", "concurrency": 5, "steps": [
            { "id": "wait", "type": "delay", "ms": "{{item.wait}}" },
            { "id": "square", "type": "transform", "output": { "n": "{{item.n}}", "index": "{{index}}", "waited": "{{steps.wait.result.waitedMs}}" } }
        ] },
        { "id": "done", "type": "finish", "result": "{{steps.each.result}}" }
    ]);
    let id = published(&app, &admin, "loop", manual(), steps).await;
    let items: Vec<Value> = (0..5)
        .map(|n| json!({ "n": n, "wait": 400 - n * 80 }))
        .collect();
    let began = Instant::now();
    let run = run_to_end(&app, &admin, &id, json!({ "items": items })).await;
    assert_eq!(run["status"], "SUCCEEDED", "{run}");
    let expected: Vec<Value> = (0..5)
        .map(|n| json!({ "n": n, "index": n, "waited": 400 - n * 80 }))
        .collect();
    assert_eq!(run["result"], Value::Array(expected));
    assert!(
        began.elapsed() < Duration::from_millis(1500),
        "the waits overlapped: {:?}",
        began.elapsed()
    );
    let recorded: Vec<&Value> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] == "square")
        .collect();
    assert_eq!(recorded.len(), 5, "one record per iteration");
    assert!(
        recorded
            .iter()
            .all(|s| s["iteration"].as_array().unwrap().len() == 1)
    );

    for (items, why) in [
        (json!("nope"), "not an array"),
        (json!((0..1001).collect::<Vec<_>>()), "too many"),
    ] {
        let run = run_to_end(&app, &admin, &id, json!({ "items": items })).await;
        assert_eq!(run["status"], "FAILED", "{why}");
        assert_eq!(run["error"]["code"], "INVALID_PAYLOAD", "{why}");
    }
}

#[tokio::test]
async fn calls_run_children_within_their_depth_and_never_in_a_cycle() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let child_steps = json!([{ "id": "twice", "type": "finish", "result": { "doubled": "{{start.data.n}}{{start.data.n}}", "user": "{{user.id}}" } }]);
    let child = published(&app, &admin, "child", manual(), child_steps).await;
    let parent_steps = json!([
        { "id": "sub", "type": "call", "workflow": "child", "input": { "n": "{{start.data.n}}" } },
        { "id": "done", "type": "finish", "result": "{{steps.sub.result}}" }
    ]);
    let parent = published(&app, &admin, "parent", manual(), parent_steps).await;
    let run = run_to_end(&app, &admin, &parent, json!({ "n": 4 })).await;
    assert_eq!(run["status"], "SUCCEEDED", "{run}");
    let me = admin_id(&app, &admin).await;
    assert_eq!(
        run["result"],
        json!({ "status": "SUCCEEDED", "result": { "doubled": "44", "user": me }, "error": null })
    );
    let child_run = run["steps"][0]["childRunId"].as_str().unwrap().to_owned();
    let listed = history(&app, &admin, &child).await;
    let listed = listed
        .iter()
        .find(|r| r["id"] == child_run.as_str())
        .unwrap();
    assert_eq!(listed["parentRunId"], run["id"]);
    assert_eq!(listed["input"], json!({ "n": 4 }));

    // A chain root -> d1 -> ... : the call that would reach depth 6 fails.
    for depth in (1..=6).rev() {
        let steps = if depth == 6 {
            json!([{ "id": "leaf", "type": "finish", "result": "leaf" }])
        } else {
            json!([{ "id": "next", "type": "call", "workflow": format!("d{}", depth + 1) },
                   { "id": "done", "type": "finish", "result": "{{steps.next.result.result}}" }])
        };
        published(&app, &admin, &format!("d{depth}"), manual(), steps).await;
    }
    let root = published(&app, &admin, "d0", manual(),
        json!([{ "id": "next", "type": "call", "workflow": "d1" }, { "id": "done", "type": "finish", "result": "{{steps.next.result}}" }])).await;
    let run = run_to_end(&app, &admin, &root, json!({})).await;
    assert_eq!(run["status"], "FAILED", "{run}");
    assert_eq!(run["error"]["code"], "WORKFLOW_CALL_DEPTH");
    let deepest = history(&app, &admin, &published_id(&app, &admin, "d5").await).await;
    assert_eq!(
        deepest[0]["steps"][0]["error"]["code"], "WORKFLOW_CALL_DEPTH",
        "d5 at depth 5 may not call d6"
    );
    assert!(
        history(&app, &admin, &published_id(&app, &admin, "d6").await)
            .await
            .is_empty(),
        "the child never started"
    );

    // A workflow calling itself is a cycle, refused before any child starts.
    let created = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "self", "trigger": manual(), "steps": [] } }),
        )
        .await;
    let itself = created.data()["id"].as_str().unwrap().to_owned();
    app.patch(&format!("/admin/api/workflows/{itself}"), &admin,
        json!({ "data": { "steps": [{ "id": "again", "type": "call", "workflow": "self", "onError": "continue" },
                                   { "id": "done", "type": "finish", "result": "{{steps.again.error.code}}" }] } })).await;
    app.post(
        &format!("/admin/api/workflows/{itself}/publish"),
        &admin,
        json!(null),
    )
    .await;
    let run = run_to_end(&app, &admin, &itself, json!({})).await;
    assert_eq!(run["result"], "WORKFLOW_CALL_DEPTH", "{run}");
    assert_eq!(
        history(&app, &admin, &itself).await.len(),
        1,
        "no child run"
    );

    // A disabled child: WORKFLOW_NOT_FOUND.
    app.patch(
        &format!("/admin/api/workflows/{child}"),
        &admin,
        json!({ "data": { "enabled": false } }),
    )
    .await;
    let run = run_to_end(&app, &admin, &parent, json!({ "n": 1 })).await;
    assert_eq!(run["error"]["code"], "WORKFLOW_NOT_FOUND", "{run}");
}

/// The id of the workflow with `slug`.
async fn published_id(app: &TestApp, admin: &str, slug: &str) -> String {
    let all = app.get("/admin/api/workflows", admin).await;
    all.data()
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["slug"] == slug)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn manual_runs_and_replays_start_the_published_version() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "draft-only", "trigger": manual(), "steps": [] } }),
        )
        .await;
    let draft = created.data()["id"].as_str().unwrap().to_owned();
    let never = app
        .post(
            &format!("/admin/api/workflows/{draft}/run"),
            &admin,
            json!({ "data": { "input": {} } }),
        )
        .await;
    assert_eq!(
        (never.status, never.code()),
        (StatusCode::CONFLICT, "CONFLICT")
    );

    let v1 =
        json!([{ "id": "f", "type": "finish", "result": { "v": 1, "got": "{{start.data.x}}" } }]);
    let id = published(&app, &admin, "versions", manual(), v1).await;
    let first = run_to_end(&app, &admin, &id, json!({ "x": "same input" })).await;
    assert_eq!(first["result"], json!({ "v": 1, "got": "same input" }));
    app.patch(&format!("/admin/api/workflows/{id}"), &admin,
        json!({ "data": { "steps": [{ "id": "f", "type": "finish", "result": { "v": 2, "got": "{{start.data.x}}" } }] } })).await;
    app.post(
        &format!("/admin/api/workflows/{id}/publish"),
        &admin,
        json!(null),
    )
    .await;
    let replayed = app
        .post(
            &format!(
                "/admin/api/workflows/{id}/runs/{}/replay",
                first["id"].as_str().unwrap()
            ),
            &admin,
            json!(null),
        )
        .await;
    assert_eq!(replayed.status, StatusCode::ACCEPTED, "{:?}", replayed.body);
    let again = stored_run(
        &app,
        &admin,
        &id,
        replayed.data()["run"]["id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(again["result"], json!({ "v": 2, "got": "same input" }));
    assert_ne!(again["id"], first["id"]);
    for bad in ["not-a-uuid", "018f0000-0000-7000-8000-000000000000"] {
        let missing = app
            .post(
                &format!("/admin/api/workflows/{id}/runs/{bad}/replay"),
                &admin,
                json!(null),
            )
            .await;
        assert_eq!(
            (missing.status, missing.code()),
            (StatusCode::NOT_FOUND, "WORKFLOW_RUN_NOT_FOUND")
        );
    }
    app.patch(
        &format!("/admin/api/workflows/{id}"),
        &admin,
        json!({ "data": { "enabled": false } }),
    )
    .await;
    let disabled = app
        .post(
            &format!("/admin/api/workflows/{id}/run"),
            &admin,
            json!({ "data": { "input": {} } }),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_schedule_runs_each_tick_once_with_its_time() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let trigger = json!({ "type": "schedule", "cron": "*/1 * * * * *", "timezone": "Europe/Paris", "executeAs": me });
    let preview = app
        .post(
            "/admin/api/workflows/schedule-preview",
            &admin,
            json!({ "data": { "trigger": trigger } }),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{:?}", preview.body);
    let next = preview.data()["next"].as_array().unwrap();
    assert_eq!(next.len(), 5);
    let bad = app.post("/admin/api/workflows/schedule-preview", &admin,
        json!({ "data": { "trigger": { "type": "schedule", "cron": "nope", "executeAs": me } } })).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let steps = json!([{ "id": "f", "type": "finish", "result": "{{start.data.scheduledAt}}" }]);
    let id = published(&app, &admin, "clock", trigger, steps).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    app.patch(
        &format!("/admin/api/workflows/{id}"),
        &admin,
        json!({ "data": { "enabled": false } }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let runs = history(&app, &admin, &id).await;
    assert!(runs.len() >= 3, "{runs:?}");
    let mut ticks: Vec<String> = runs
        .iter()
        .map(|r| r["result"].as_str().unwrap().to_owned())
        .collect();
    for run in &runs {
        assert_eq!(run["input"]["scheduledAt"], run["result"]);
        assert!(run["result"].as_str().unwrap().ends_with('Z'));
        assert!(run["scheduledAt"].is_string());
    }
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), runs.len(), "one run per tick");
}
