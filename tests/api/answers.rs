//! Bounded answers (API.md 17) through HTTP: `data.max_answer_bytes`
//! refuses an answer while it is built (lists on both paths, nested
//! embeds, batches, DataViews, MCP tools) and CSV exports stream past it;
//! one caller holds at most two export streams; the worst nesting the API
//! accepts keeps the instance's memory bounded.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

use crate::data::{create_table, encode, expose};
use crate::mcp::{Client, enable};

/// `app.a` (1,000 rows) <- `app.b` (5 each) <- `app.c` (5 each) <- `app.d`
/// (2 each, `body` of `d_bytes`), with `body` of 200 bytes on `c`.
async fn tree(app: &TestApp, admin: &str, d_bytes: usize) {
    let key = json!({ "name": "id", "dataType": "bigint", "primaryKey": true });
    let a = create_table(
        app,
        admin,
        "app",
        "a",
        json!([key, { "name": "name", "dataType": "text" }]),
    )
    .await;
    let mut resources = vec![a];
    for (table, parent) in [("b", "a"), ("c", "b"), ("d", "c")] {
        let columns = json!([key,
            { "name": format!("{parent}_id"), "dataType": "bigint",
              "foreignKey": { "targetTable": parent, "targetColumn": "id" } },
            { "name": "body", "dataType": "text" }]);
        resources.push(create_table(app, admin, "app", table, columns).await);
    }
    for resource in &resources {
        expose(app, admin, resource, &["GET", "POST"]).await;
    }
    for statement in [
        "INSERT INTO app.a SELECT n, 'author ' || n FROM generate_series(1, 1000) n".to_owned(),
        "INSERT INTO app.b SELECT n, (n - 1) / 5 + 1, 'b' FROM generate_series(1, 5000) n".to_owned(),
        "INSERT INTO app.c SELECT n, (n - 1) / 5 + 1, repeat('c', 200) FROM generate_series(1, 25000) n".to_owned(),
        format!("INSERT INTO app.d SELECT n, (n - 1) / 2 + 1, repeat('d', {d_bytes}) FROM generate_series(1, 50000) n"),
        "CREATE INDEX ON app.b (a_id)".to_owned(),
        "CREATE INDEX ON app.c (b_id)".to_owned(),
        "CREATE INDEX ON app.d (c_id)".to_owned(),
        "ANALYZE app.a, app.b, app.c, app.d".to_owned(),
    ] {
        app.db.sql(&statement).await;
    }
}

/// Three levels of to-many embeds under `app.a`.
fn deepest() -> String {
    encode("id,name,bs:app.b!a_id(id,cs:app.c!b_id(id,body,ds:app.d!c_id(id,body)))")
}

async fn set_cap(app: &TestApp, admin: &str, bytes: u64) -> Answer {
    app.patch(
        "/admin/api/settings",
        admin,
        json!({ "data": { "data.max_answer_bytes": bytes } }),
    )
    .await
}

fn assert_too_large(answer: &Answer, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::BAD_REQUEST,
        "{what}: {:?}",
        answer.body
    );
    assert_eq!(answer.code(), "INVALID_QUERY", "{what}");
    let message = answer.body["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("data.max_answer_bytes") && message.contains("page"),
        "{what}: {message}"
    );
}

#[tokio::test]
async fn answers_past_the_ceiling_are_refused_while_they_are_built() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    tree(&app, &admin, 100).await;
    let refused = set_cap(&app, &admin, 1_048_575).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        set_cap(&app, &admin, 1_048_576).await.status,
        StatusCode::OK
    );
    let deep = deepest();

    // Control: a page under the ceiling answers, on both paths, with every
    // related row (each of a's 5 b's, 5 c's each, 2 d's each).
    for count in ["", "&count=exact"] {
        let page = app
            .get(
                &format!("/api/data/app/a?select={deep}&sort=id&limit=10{count}"),
                &admin,
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
        let rows = page.data().as_array().unwrap();
        assert_eq!(rows.len(), 10);
        assert_eq!(rows[0]["bs"][4]["cs"][4]["ds"].as_array().unwrap().len(), 2);
    }
    // The same nesting over 1,000 rows (about 12 MB) is refused, on both
    // paths; so are plain rows past it.
    for count in ["", "&count=exact"] {
        let all = app
            .get(
                &format!("/api/data/app/a?select={deep}&sort=id&limit=1000{count}"),
                &admin,
            )
            .await;
        assert_too_large(&all, count);
    }
    let plain = app.get("/api/data/app/d?limit=1000&sort=id", &admin).await;
    assert_eq!(plain.status, StatusCode::OK, "{:?}", plain.body);
    app.db
        .sql("UPDATE app.d SET body = repeat('x', 2000) WHERE id <= 1000")
        .await;
    // Plain rows are bounded on both paths, PostgreSQL measuring each row
    // as it adds it to the array when it builds the answer.
    for count in ["", "&count=exact"] {
        let rows = app
            .get(
                &format!("/api/data/app/d?limit=1000&sort=id{count}"),
                &admin,
            )
            .await;
        assert_too_large(&rows, &format!("plain rows{count}"));
        let under = app
            .get(&format!("/api/data/app/d?limit=400&sort=id{count}"), &admin)
            .await;
        assert_eq!(under.status, StatusCode::OK, "{count}: {:?}", under.body);
    }
    // Aggregate groups too: a thousand groups of 2 KB each.
    let groups = app
        .get(
            "/api/data/app/d?aggregate=n:count()&groupBy=id,body&limit=1000",
            &admin,
        )
        .await;
    assert_too_large(&groups, "aggregate groups");
    // The rows a write answers too: refused, and nothing written.
    app.db
        .sql("ALTER TABLE app.d ALTER COLUMN body SET DEFAULT repeat('y', 5000)")
        .await;
    let rows: Vec<Value> = (0..300)
        .map(|n| json!({ "id": 100_000 + n, "c_id": 1 }))
        .collect();
    let written = app
        .post("/api/data/app/d", &admin, json!({ "data": rows }))
        .await;
    assert_too_large(&written, "rows a write answers");
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM app.d WHERE id >= 100000")
            .await
            .as_deref(),
        Some("0")
    );
    // A row read by key is bounded the same way.
    let one = app
        .get(&format!("/api/data/app/a/1?select={deep}"), &admin)
        .await;
    assert_eq!(one.status, StatusCode::OK, "{:?}", one.body);

    // A batch's answers share one ceiling: the third read passes it.
    let half = json!({ "method": "GET", "path": "/api/data/app/d",
                       "query": { "limit": "250", "sort": "id" } });
    let batch = app
        .post(
            "/api/batch",
            &admin,
            json!({ "data": [half.clone(), half.clone(), half] }),
        )
        .await;
    assert_too_large(&batch, "a batch");
    assert_eq!(batch.body["meta"]["index"], 2, "{:?}", batch.body);

    // CSV exports stream and are exempt.
    let csv = app
        .client
        .get(format!("{}/api/data/app/c", app.address))
        .bearer_auth(&admin)
        .header("Accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), StatusCode::OK);
    assert_eq!(csv.text().await.unwrap().lines().count(), 25_001);

    // An MCP tool's answer too.
    enable(&app, &admin).await;
    let mut client = Client::new(&app, &admin);
    client.initialize().await;
    let (failed, text) = client
        .call(
            "query_rows",
            json!({ "resource": "app.d", "limit": 1000, "sort": "id" }),
        )
        .await;
    assert!(failed && text.starts_with("INVALID_QUERY"), "{text}");
    let (failed, _) = client
        .call(
            "query_rows",
            json!({ "resource": "app.d", "limit": 10, "sort": "id" }),
        )
        .await;
    assert!(!failed);

    // A DataView's page.
    let view = app
        .post(
            "/admin/api/dataviews",
            &admin,
            json!({ "data": { "slug": "bodies", "name": "Bodies", "source": "app.d",
                "columns": [{ "name": "id", "column": "id" }, { "name": "body", "column": "body" }],
                "sort": ["id"] } }),
        )
        .await;
    assert_eq!(view.status, StatusCode::CREATED, "{:?}", view.body);
    let id = view.data()["id"].as_str().unwrap();
    let published = app
        .post(
            &format!("/admin/api/dataviews/{id}/publish"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(published.status, StatusCode::OK, "{:?}", published.body);
    let small = app.get("/api/views/bodies?limit=10", &admin).await;
    assert_eq!(small.status, StatusCode::OK, "{:?}", small.body);
    assert_too_large(
        &app.get("/api/views/bodies?limit=1000", &admin).await,
        "a DataView",
    );
}

/// Related rows count once against the ceiling, however they nest (a
/// to-one row holding to-many ones, inside to-many ones): an answer within
/// 5% of it is whole (PostgreSQL counts its arrays with a space after each
/// comma, which the answer drops), one byte over it is refused.
#[tokio::test]
async fn nested_related_rows_count_once_against_the_ceiling() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    tree(&app, &admin, 100).await;
    let shape = encode("id,body,ds:app.d!c_id(id,body,c:c_id(id,body,ds:app.d!c_id(id,body)))");
    let path = format!("/api/data/app/c?select={shape}&sort=id&limit=1000");
    let whole = app.get(&path, &admin).await;
    assert_eq!(whole.status, StatusCode::OK, "{:?}", whole.body);
    let rows = whole.data().as_array().unwrap();
    assert_eq!(rows[0]["ds"][0]["c"]["ds"].as_array().unwrap().len(), 2);
    let bytes = whole.data().to_string().len() as u64;
    assert!(bytes > 1_200_000, "{bytes}");
    assert_eq!(
        set_cap(&app, &admin, bytes + bytes / 20).await.status,
        StatusCode::OK
    );
    let at = app.get(&path, &admin).await;
    assert_eq!(at.status, StatusCode::OK, "{:?}", at.body);
    assert_eq!(at.data(), whole.data());
    assert_eq!(
        set_cap(&app, &admin, bytes - 1).await.status,
        StatusCode::OK
    );
    assert_too_large(&app.get(&path, &admin).await, "one byte over");
}

/// The peak resident memory of this process (the instance runs in it), in
/// bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("kB");
    kb * 1024
}

#[tokio::test]
async fn the_worst_nesting_keeps_the_instance_under_300_mb() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // About 55 MB of related rows under 1,000 listed rows, past the
    // default ceiling (32 MB).
    tree(&app, &admin, 1000).await;
    let deep = deepest();
    let path = format!("/api/data/app/a?select={deep}&sort=id&limit=1000");
    let requests = (0..16).map(|i| {
        let (app, admin) = (&app, &admin);
        let query = if i % 2 == 0 {
            path.clone()
        } else {
            format!("{path}&count=exact")
        };
        async move { app.get(&query, admin).await }
    });
    let answers: Vec<Answer> = futures_util::future::join_all(requests).await;
    for answer in &answers {
        assert_too_large(answer, "the worst nesting");
    }
    let peak = peak_rss();
    assert!(
        peak < 300 * 1024 * 1024,
        "peak RSS {} MB",
        peak / (1024 * 1024)
    );
}

/// Sixteen answers of the worst nesting just under the ceiling (4 MiB
/// here), all accepted at once: each is held about once on its way out
/// (compacted in place, its buffer the response's body), so the instance
/// stays under 300 MB (the test's client keeps only each body's length).
#[tokio::test]
async fn accepted_answers_at_the_ceiling_keep_the_instance_under_300_mb() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    tree(&app, &admin, 1000).await;
    let cap: u64 = 4 * 1024 * 1024;
    assert_eq!(set_cap(&app, &admin, cap).await.status, StatusCode::OK);
    let deep = deepest();
    // Every listed row has the same related rows: the page that fits.
    let sample = app
        .get(
            &format!("/api/data/app/a?select={deep}&sort=id&limit=10"),
            &admin,
        )
        .await;
    assert_eq!(sample.status, StatusCode::OK, "{:?}", sample.body);
    let per_row = sample.data().to_string().len() as u64 / 10;
    let limit = cap * 95 / 100 / per_row;
    let path = format!("/api/data/app/a?select={deep}&sort=id&limit={limit}");
    let requests = (0..16).map(|_| async {
        let response = app
            .client
            .get(format!("{}{path}", app.address))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.bytes().await.unwrap().len() as u64)
    });
    for (status, bytes) in futures_util::future::join_all(requests).await {
        assert_eq!(status, StatusCode::OK);
        assert!(bytes > cap * 9 / 10 && bytes < cap + 100, "{bytes}");
    }
    let peak = peak_rss();
    assert!(
        peak < 300 * 1024 * 1024,
        "peak RSS {} MB",
        peak / (1024 * 1024)
    );
}

async fn open_export(app: &TestApp, bearer: &str) -> reqwest::Response {
    app.client
        .get(format!("{}/api/data/app/d", app.address))
        .bearer_auth(bearer)
        .header("Accept", "text/csv")
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn one_caller_holds_at_most_two_export_streams() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // About 50 MB of CSV: more than the socket buffers hold, so an export
    // whose body is not read stays open.
    tree(&app, &admin, 1000).await;
    let first = open_export(&app, &admin).await;
    let second = open_export(&app, &admin).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);
    let third = open_export(&app, &admin).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().get("retry-after").is_some());
    let body: Value = third.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "RATE_LIMIT_EXCEEDED");
    // Another caller is not held back.
    let other_session = {
        app.create_user(
            &admin,
            "second-admin@example.com",
            "password-1",
            Some(vec![crate::ADMINS_ROLE.into()]),
        )
        .await;
        app.login("second-admin@example.com", "password-1").await
    };
    let other = open_export(&app, &other_session).await;
    assert_eq!(other.status(), StatusCode::OK);
    drop(other);
    // A stream read to its end gives its slot back.
    assert!(first.text().await.unwrap().len() > 40_000_000);
    let mut again = open_export(&app, &admin).await;
    for _ in 0..50 {
        if again.status() == StatusCode::OK {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        again = open_export(&app, &admin).await;
    }
    assert_eq!(again.status(), StatusCode::OK);
    drop(second);
}

/// Related rows are read for the page alone: the rows an offset skips
/// build no embeds, so they add nothing to the answer's count.
#[tokio::test]
async fn rows_an_offset_skips_count_nothing_against_the_ceiling() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    tree(&app, &admin, 10).await;
    let shape = encode("id,bs:app.b!a_id(id,cs:app.c!b_id(id,body))");
    let path = format!("/api/data/app/a?select={shape}&sort=id&limit=2&offset=900");
    let page = app.get(&path, &admin).await;
    assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
    let ids: Vec<_> = page
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, [json!(901), json!(902)]);
    assert_eq!(page.data()[1]["bs"][4]["cs"].as_array().unwrap().len(), 5);
    // The page is about 11 kB, under the least ceiling there is (1 MiB);
    // the 900 rows before it would be 5 MB.
    let bytes = page.data().to_string().len() as u64;
    assert!((10_000..100_000).contains(&bytes), "{bytes}");
    assert_eq!(
        set_cap(&app, &admin, 1_048_576).await.status,
        StatusCode::OK
    );
    let capped = app.get(&path, &admin).await;
    assert_eq!(capped.status, StatusCode::OK, "{:?}", capped.body);
    assert_eq!(capped.data(), page.data());
    // Control: without the offset, the ceiling refuses the first 900 rows.
    let from_start = format!("/api/data/app/a?select={shape}&sort=id&limit=902");
    assert_too_large(&app.get(&from_start, &admin).await, "902 rows");
    // Descending and with a filter, the page is the same rows the plain
    // list names.
    let filtered = format!(
        "/api/data/app/a?select={shape}&sort=-id&limit=3&offset=10&filter={}",
        encode(r#"{"id":{"lt":500}}"#)
    );
    let plain = format!(
        "/api/data/app/a?select=id&sort=-id&limit=3&offset=10&filter={}",
        encode(r#"{"id":{"lt":500}}"#)
    );
    let with_embeds = app.get(&filtered, &admin).await;
    let ids: Vec<_> = with_embeds
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!({ "id": r["id"] }))
        .collect();
    assert_eq!(json!(ids), *app.get(&plain, &admin).await.data());
}
