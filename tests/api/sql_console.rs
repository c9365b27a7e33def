//! The SQL console: one statement with bound parameters, READ ONLY, the
//! timeout, PostgreSQL's refusals as 400 SQL_ERROR, the row cap, who may call
//! it, and the audit of every call that reached the database.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

async fn sql(app: &TestApp, bearer: &str, body: Value) -> Answer {
    app.post("/admin/api/sql", bearer, json!({ "data": body }))
        .await
}

#[tokio::test]
async fn a_statement_answers_its_columns_and_rows_with_parameters_bound() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let answer = sql(
        &app,
        &admin,
        json!({
            "query": "SELECT $1::int + 1 AS n, $2 AS word, $2 || '!' AS word, NULL::text AS nothing, \
                      ARRAY[1, NULL, 3] AS list, '{\"a\": [1, 2]}'::jsonb AS doc, 1.50::numeric AS price, \
                      '2026-04-05 10:00:00+00'::timestamptz AS at, 'P1DT2H'::interval AS span, \
                      '\\x00ff'::bytea AS raw, 2.5::float8 AS ratio, true AS yes",
            "params": [41, "it's"],
        }),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let data = answer.data();
    let columns: Vec<(&str, &str)> = data["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("n", "int4"),
            ("word", "text"),
            ("word", "text"),
            ("nothing", "text"),
            ("list", "int4[]"),
            ("doc", "jsonb"),
            ("price", "numeric"),
            ("at", "timestamptz"),
            ("span", "interval"),
            ("raw", "bytea"),
            ("ratio", "float8"),
            ("yes", "bool"),
        ]
    );
    assert_eq!(
        data["rows"],
        json!([[
            42,
            "it's",
            "it's!",
            null,
            [1, null, 3],
            { "a": [1, 2] },
            1.50,
            "2026-04-05T10:00:00+00:00",
            "P1DT2H",
            "\\x00ff",
            2.5,
            true
        ]])
    );
    assert_eq!(data["rowCount"], 1);
    assert!(data["durationMs"].as_f64().unwrap() >= 0.0);
    assert_eq!(answer.body["meta"]["truncated"], false);
}

#[tokio::test]
async fn commands_count_the_rows_they_change_and_read_only_refuses_writes() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = sql(
        &app,
        &admin,
        json!({ "query": "CREATE TABLE public.notes (id int PRIMARY KEY, body text)" }),
    )
    .await;
    assert_eq!(created.status, StatusCode::OK, "{created:?}");
    assert_eq!(created.data()["columns"], json!([]));
    let inserted = sql(
        &app,
        &admin,
        json!({ "query": "INSERT INTO public.notes SELECT g, 'n' || g FROM generate_series(1, $1::int) g", "params": [3] }),
    )
    .await;
    assert_eq!(inserted.data()["rowCount"], 3, "{inserted:?}");

    let refused = sql(
        &app,
        &admin,
        json!({ "query": "DELETE FROM public.notes", "readOnly": true }),
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.code(), "SQL_ERROR");
    assert!(
        refused.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("read-only transaction"),
        "{refused:?}"
    );
    let read = sql(
        &app,
        &admin,
        json!({ "query": "SELECT count(*) FROM public.notes", "readOnly": true }),
    )
    .await;
    assert_eq!(read.data()["rows"], json!([[3]]));

    // What a statement sets stays with its own connection, which is closed.
    for _ in 0..3 {
        let set = sql(
            &app,
            &admin,
            json!({ "query": "SET search_path = nowhere" }),
        )
        .await;
        assert_eq!(set.status, StatusCode::OK, "{set:?}");
        let memory = sql(&app, &admin, json!({ "query": "SET work_mem = '64kB'" })).await;
        assert_eq!(memory.status, StatusCode::OK, "{memory:?}");
    }
    for _ in 0..5 {
        let path = sql(
            &app,
            &admin,
            json!({ "query": "SELECT current_setting('search_path'), current_setting('work_mem'), current_user" }),
        )
        .await;
        let row = &path.data()["rows"][0];
        assert_eq!(row[0], "\"$user\", public");
        assert_ne!(row[1], "64kB");
        assert_eq!(row[2], testkit::TEST_DATABASE_OWNER);
        assert_eq!(
            app.get("/admin/api/roles", &admin).await.status,
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn one_statement_only_and_postgres_refusals_are_400_with_their_position() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let two = sql(
        &app,
        &admin,
        json!({ "query": "SELECT 1; DROP TABLE svc.audit_log" }),
    )
    .await;
    assert_eq!(two.status, StatusCode::BAD_REQUEST);
    assert_eq!(two.code(), "INVALID_PAYLOAD");
    assert_eq!(two.body["errors"][0]["field"], "query");
    // Nothing of it ran: the audit log is still there.
    assert!(
        app.db
            .sql("SELECT count(*)::text FROM svc.audit_log")
            .await
            .is_some()
    );

    let typo = sql(&app, &admin, json!({ "query": "SELEC 1" })).await;
    assert_eq!(typo.status, StatusCode::BAD_REQUEST);
    assert_eq!(typo.code(), "SQL_ERROR");
    assert!(
        typo.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("syntax error"),
        "{typo:?}"
    );
    assert_eq!(typo.body["errors"][0]["position"], 1);

    let unknown = sql(
        &app,
        &admin,
        json!({ "query": "SELECT nope FROM svc.roles" }),
    )
    .await;
    assert_eq!(unknown.code(), "SQL_ERROR");
    assert_eq!(unknown.body["errors"][0]["position"], 8);

    let params = sql(
        &app,
        &admin,
        json!({ "query": "SELECT $1::int", "params": [] }),
    )
    .await;
    assert_eq!(params.code(), "INVALID_PAYLOAD");
    assert_eq!(params.body["errors"][0]["field"], "params");
    let wrong = sql(
        &app,
        &admin,
        json!({ "query": "SELECT $1::int", "params": ["many"] }),
    )
    .await;
    assert_eq!(wrong.code(), "INVALID_PAYLOAD");
    assert_eq!(wrong.body["errors"][0]["field"], "params[0]");
    let missing = sql(&app, &admin, json!({ "params": [] })).await;
    assert_eq!(missing.code(), "INVALID_PAYLOAD");
}

#[tokio::test]
async fn the_timeout_is_a_400_in_time_and_rows_past_the_cap_are_counted_not_sent() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "sql_console.timeout_ms": 300 } }),
    )
    .await;
    let started = std::time::Instant::now();
    let slow = sql(&app, &admin, json!({ "query": "SELECT pg_sleep(5)" })).await;
    assert_eq!(slow.status, StatusCode::BAD_REQUEST, "{slow:?}");
    assert_eq!(slow.code(), "SQL_ERROR");
    assert!(
        slow.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("statement timeout")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));

    let many = sql(
        &app,
        &admin,
        json!({ "query": "SELECT g FROM generate_series(1, 1500) g" }),
    )
    .await;
    assert_eq!(many.data()["rows"].as_array().unwrap().len(), 1000);
    assert_eq!(many.data()["rows"][999], json!([1000]));
    assert_eq!(many.data()["rowCount"], 1500);
    assert_eq!(many.body["meta"]["truncated"], true);
}

#[tokio::test]
async fn tokens_need_the_setting_users_are_refused_and_every_call_is_audited() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let token = app.create_token(&admin, "ADMIN").await;
    let refused = sql(&app, &token, json!({ "query": "SELECT 1" })).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "PERMISSION_DENIED");
    let guarded = app
        .patch(
            "/admin/api/settings",
            &token,
            json!({ "data": { "sql_console.allow_api_tokens": true } }),
        )
        .await;
    assert_eq!(guarded.status, StatusCode::FORBIDDEN);
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "sql_console.allow_api_tokens": true } }),
    )
    .await;
    let allowed = sql(&app, &token, json!({ "query": "SELECT 'by token'" })).await;
    assert_eq!(allowed.status, StatusCode::OK, "{allowed:?}");

    app.create_user(&admin, "user@example.com", "user-password-123", None)
        .await;
    let user = app.login("user@example.com", "user-password-123").await;
    let denied = sql(&app, &user, json!({ "query": "SELECT 1" })).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    let anonymous = sql(&app, "", json!({ "query": "SELECT 1" })).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    sql(&app, &admin, json!({ "query": "SELECT * FROM nowhere" })).await;
    let log = app.get("/admin/api/audit?action=sql.execute", &admin).await;
    let entries = log.data().as_array().unwrap();
    let queries: Vec<(&str, Option<&str>)> = entries
        .iter()
        .map(|e| {
            (
                e["details"]["query"].as_str().unwrap(),
                e["details"]["error"].as_str(),
            )
        })
        .collect();
    assert!(
        queries.contains(&("SELECT 'by token'", None)),
        "{queries:?}"
    );
    assert!(
        queries
            .iter()
            .any(|(q, error)| *q == "SELECT * FROM nowhere"
                && error.is_some_and(|e| e.contains("does not exist"))),
        "{queries:?}"
    );
    // Refused before the database: not audited.
    assert!(
        !queries.iter().any(|(q, _)| *q == "SELECT 1"),
        "{queries:?}"
    );
}
