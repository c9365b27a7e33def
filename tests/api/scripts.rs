//! Script steps (API.md 18) through HTTP: a module's default export over
//! the run's context, async results, thrown codes, refusals at save, the
//! time and memory limits (the instance staying small while many bombs
//! run), nothing of the host, and logs kept and redacted.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

use crate::workflows::published;

fn webhook() -> Value {
    json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" })
}

/// A published sync webhook `slug` of `steps`, ending with the last step's result.
async fn scripted(app: &TestApp, admin: &str, slug: &str, code: &str, limits: Value) -> String {
    let mut script = json!({ "id": "s", "type": "script", "code": code });
    script
        .as_object_mut()
        .unwrap()
        .extend(limits.as_object().cloned().unwrap_or_default());
    let steps = json!([
        { "id": "q", "type": "transform", "output": "{{start.data.body.numbers}}" },
        script,
        { "id": "done", "type": "finish", "result": "{{steps.s.result}}" },
    ]);
    published(app, admin, slug, webhook(), steps).await
}

async fn run(app: &TestApp, bearer: &str, slug: &str, body: Value) -> Answer {
    let answer = app
        .post(&format!("/api/workflows/{slug}/webhook"), bearer, body)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer
}

/// The VmRSS of this process (the instance runs in it), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[tokio::test]
async fn a_script_computes_over_the_context_and_fails_with_its_code() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let numbers: Vec<u32> = (1..=100).collect();
    scripted(
        &app,
        &admin,
        "sum",
        "export default function (ctx) { return ctx.steps.q.result.reduce((a, b) => a + b, 0) }",
        json!({}),
    )
    .await;
    let sum = run(&app, &admin, "sum", json!({ "numbers": numbers })).await;
    assert_eq!(sum.data()["status"], "SUCCEEDED", "{:?}", sum.body);
    assert_eq!(sum.data()["result"], 5050);

    scripted(
        &app,
        &admin,
        "later",
        "export default async function (ctx) { const n = await Promise.resolve(ctx.steps.q.result.length); \
         return { count: n, user: typeof ctx.user.id } }",
        json!({}),
    )
    .await;
    let later = run(&app, &admin, "later", json!({ "numbers": [1, 2] })).await;
    assert_eq!(
        later.data()["result"],
        json!({ "count": 2, "user": "string" })
    );

    scripted(
        &app,
        &admin,
        "refuse",
        "export default function (ctx) { if (ctx.steps.q.result.length > 1) \
         throw { code: 'OUT_OF_STOCK', message: 'only one left' }; return 'ok' }",
        json!({}),
    )
    .await;
    // Control: one item passes.
    let one = run(&app, &admin, "refuse", json!({ "numbers": [1] })).await;
    assert_eq!(one.data()["result"], "ok");
    let two = run(&app, &admin, "refuse", json!({ "numbers": [1, 2] })).await;
    assert_eq!(two.data()["status"], "FAILED");
    assert_eq!(
        two.data()["error"],
        json!({ "code": "OUT_OF_STOCK", "message": "only one left" })
    );

    // Nothing of the host is there.
    scripted(
        &app,
        &admin,
        "host",
        "export default () => [typeof fetch, typeof require, typeof process, typeof Deno, typeof setTimeout]",
        json!({}),
    )
    .await;
    let host = run(&app, &admin, "host", json!({ "numbers": [] })).await;
    assert_eq!(host.data()["result"], json!(vec!["undefined"; 5]));
}

#[tokio::test]
async fn a_module_that_does_not_compile_or_exports_nothing_is_refused_at_save() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let save = |code: Value, extra: Value| {
        let mut step = json!({ "id": "s", "type": "script", "code": code });
        step.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        app.post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": format!("s{}", rand_suffix()), "trigger": webhook(), "steps": [step] } }),
        )
    };
    let good = save(json!("export default () => 1"), json!({})).await;
    assert_eq!(good.status, StatusCode::CREATED, "{:?}", good.body);
    for (code, extra, field) in [
        (
            json!("export default function ( {"),
            json!({}),
            "steps[0].code",
        ),
        (json!("export const x = 1"), json!({}), "steps[0].code"),
        (
            json!("import os from 'os'; export default () => 1"),
            json!({}),
            "steps[0].code",
        ),
        (
            json!("export default () => 1"),
            json!({ "timeoutMs": 0 }),
            "steps[0].timeoutMs",
        ),
        (
            json!("export default () => 1"),
            json!({ "timeoutMs": 10001 }),
            "steps[0].timeoutMs",
        ),
        (
            json!("export default () => 1"),
            json!({ "memoryMb": 65 }),
            "steps[0].memoryMb",
        ),
    ] {
        let refused = save(code.clone(), extra).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{code}: {:?}",
            refused.body
        );
        assert_eq!(refused.code(), "INVALID_PAYLOAD");
        assert_eq!(
            refused.body["errors"][0]["field"], field,
            "{code}: {:?}",
            refused.body
        );
    }
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn endless_loops_and_allocation_bombs_stop_and_the_instance_stays_small() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    scripted(
        &app,
        &admin,
        "endless",
        "export default () => { for (;;) {} }",
        json!({ "timeoutMs": 200 }),
    )
    .await;
    let started = std::time::Instant::now();
    let endless = run(&app, &admin, "endless", json!({})).await;
    assert_eq!(
        endless.data()["error"]["code"],
        "SCRIPT_TIMEOUT",
        "{:?}",
        endless.body
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    scripted(
        &app,
        &admin,
        "bomb",
        "export default () => { const a = []; for (;;) a.push('x'.repeat(1000) + a.length) }",
        json!({ "timeoutMs": 10000 }),
    )
    .await;
    let before = rss();
    let bombs: Vec<_> = (0..16)
        .map(|_| {
            let app = &app;
            let admin = &admin;
            async move { run(app, admin, "bomb", json!({})).await }
        })
        .collect();
    let watcher = async {
        let mut peak = 0;
        for _ in 0..100 {
            peak = peak.max(rss());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        peak
    };
    let (answers, peak) = tokio::join!(futures_util::future::join_all(bombs), watcher);
    for answer in answers {
        assert_eq!(
            answer.data()["error"]["code"],
            "SCRIPT_MEMORY",
            "{:?}",
            answer.body
        );
    }
    assert!(
        peak < 300 << 20,
        "RSS peaked at {} MB (from {} MB)",
        peak >> 20,
        before >> 20
    );
    // The next run works.
    scripted(
        &app,
        &admin,
        "after",
        "export default () => 'fine'",
        json!({}),
    )
    .await;
    assert_eq!(
        run(&app, &admin, "after", json!({})).await.data()["result"],
        "fine"
    );
}

#[tokio::test]
async fn logs_are_kept_in_the_step_and_redacted_like_the_run() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let id = scripted(
        &app,
        &admin,
        "logs",
        "export default (ctx) => { console.log('key', ctx.start.data.meta.headers['x-api-key']); \
         console.log({ n: 1 }); return 1 }",
        json!({}),
    )
    .await;
    let tested = app
        .post(
            &format!("/admin/api/workflows/{id}/test"),
            &admin,
            json!({ "data": { "body": {}, "meta": { "ip": null, "headers": { "x-api-key": "very-secret-key" } } } }),
        )
        .await;
    assert_eq!(tested.status, StatusCode::OK, "{:?}", tested.body);
    let step = tested.data()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "s")
        .cloned()
        .unwrap();
    assert_eq!(
        step["logs"],
        json!(["key [REDACTED]", "{\"n\":1}"]),
        "{step:?}"
    );
    let runs = app
        .get(&format!("/admin/api/workflows/{id}/runs"), &admin)
        .await;
    let stored = runs.data()[0]["steps"][1]["logs"].clone();
    assert_eq!(stored, json!(["key [REDACTED]", "{\"n\":1}"]));
    assert!(!runs.body.to_string().contains("very-secret-key"));
}
