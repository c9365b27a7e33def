//! CSV out and in on the Data API (API.md 13), with a non-administrator.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{create_role, create_table, encode, expose, grant, member};

/// `app.people`, readable and writable by a new member; answers
/// (resource, member's session).
async fn people(app: &TestApp, admin: &str) -> (String, String) {
    let people = create_table(app, admin, "app", "people", json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true },
        { "name": "name", "dataType": "text", "check": "name <> 'bad'", "checkMessage": "No bad names" },
        { "name": "team", "dataType": "text" },
        { "name": "active", "dataType": "boolean" },
        { "name": "tags", "dataType": "text[]" },
        { "name": "meta", "dataType": "jsonb" },
        { "name": "salary", "dataType": "numeric" }])).await;
    expose(app, admin, &people, &["GET", "POST"]).await;
    let role = create_role(app, admin, "hr").await;
    // Red team rows only, and the salary hidden.
    grant(
        app,
        admin,
        &role,
        &people,
        "read",
        json!({ "team": { "eq": "red" } }),
        json!(["id", "name", "team", "active", "tags", "meta"]),
    )
    .await;
    grant(
        app,
        admin,
        &role,
        &people,
        "create",
        json!({ "team": { "eq": "red" } }),
        json!(["id", "name", "team", "active", "tags", "meta"]),
    )
    .await;
    let (_, session) = member(app, admin, "hr@x.test", &role).await;
    (people, session)
}

async fn import(app: &TestApp, bearer: &str, body: impl Into<reqwest::Body>) -> testkit::Answer {
    import_into(app, bearer, "app/people", body).await
}

/// `POST /api/data/{table}` of `body` as CSV.
pub(crate) async fn import_into(
    app: &TestApp,
    bearer: &str,
    table: &str,
    body: impl Into<reqwest::Body>,
) -> testkit::Answer {
    let response = app
        .client
        .post(format!("{}/api/data/{table}", app.address))
        .bearer_auth(bearer)
        .header("Content-Type", "text/csv")
        .body(body)
        .send()
        .await
        .unwrap();
    TestApp::answer(response).await
}

async fn export(app: &TestApp, bearer: &str, query: &str) -> (StatusCode, String, String) {
    let response = app
        .client
        .get(format!("{}/api/data/app/people?{query}", app.address))
        .bearer_auth(bearer)
        .header("Accept", "text/csv")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

#[tokio::test]
async fn csv_goes_in_all_or_nothing_and_comes_out_as_the_grants_show_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;

    let done = import(
        &app,
        &hr,
        "id,name,team,active,tags,meta\r\n\
        1,Ada,red,t,\"{a,b}\",\"{\"\"k\"\": 1}\"\r\n\
        2,\"Bo, \"\"the\"\"\nsecond\",red,false,,\r\n\
        3,\"\",red,,{},null\n",
    )
    .await;
    assert_eq!(done.status, StatusCode::CREATED, "{:?}", done.body);
    assert_eq!(done.data(), &json!({ "inserted": 3 }));
    let rows = app.get("/api/data/app/people?sort=id", &hr).await;
    assert_eq!(
        rows.data(),
        &json!([
        { "id": 1, "name": "Ada", "team": "red", "active": true, "tags": ["a", "b"], "meta": { "k": 1 } },
        { "id": 2, "name": "Bo, \"the\"\nsecond", "team": "red", "active": false, "tags": null, "meta": null },
        { "id": 3, "name": "", "team": "red", "active": null, "tags": [], "meta": null }])
    );

    // Any bad record: its error with its line (a quoted field spanning
    // lines is one record), and nothing inserted.
    for (body, line, code, field) in [
        (
            "id,name,team\n4,x,red\n5,\"two\nlines\",blue\n",
            3,
            "PERMISSION_DENIED",
            Value::Null,
        ),
        (
            "id,name,team\n4,x,red\n5,bad,red\n",
            3,
            "CHECK_VIOLATION",
            Value::Null,
        ),
        (
            "id,name,team\n4,x,red\nfive,y,red\n",
            3,
            "INVALID_PAYLOAD",
            json!("id"),
        ),
        (
            "id,name,team\n4,x,red\n1,dup,red\n",
            3,
            "CONFLICT",
            Value::Null,
        ),
        (
            "id,name,salary\n4,x,1\n",
            1,
            "INVALID_PAYLOAD",
            json!("salary"),
        ),
        ("id,name,nope\n", 1, "INVALID_PAYLOAD", json!("nope")),
        ("id,name,team\n4,x\n", 2, "INVALID_PAYLOAD", json!("data")),
        (
            "id,name,team\n4,\"x,red\n",
            2,
            "INVALID_PAYLOAD",
            json!("data"),
        ),
        ("", 1, "INVALID_PAYLOAD", json!("data")),
    ] {
        let answer = import(&app, &hr, body).await;
        assert!(answer.status.is_client_error(), "{body}: {:?}", answer.body);
        assert_eq!(
            answer.body["errors"][0]["code"], code,
            "{body}: {:?}",
            answer.body
        );
        assert_eq!(
            answer.body["meta"]["line"], line,
            "{body}: {:?}",
            answer.body
        );
        if !field.is_null() {
            assert_eq!(answer.body["errors"][0]["field"], field, "{body}");
        }
    }
    let wide = format!("id,name\n1,{}\n", ",".repeat(5000));
    let answer = import(&app, &hr, wide).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
    assert_eq!(answer.body["meta"]["line"], 2);
    let upsert = app
        .client
        .post(format!("{}/api/data/app/people?onConflict=id", app.address))
        .bearer_auth(&hr)
        .header("Content-Type", "text/csv")
        .body("id,name\n1,x\n")
        .send()
        .await
        .unwrap();
    let upsert = TestApp::answer(upsert).await;
    assert_eq!(upsert.status, StatusCode::BAD_REQUEST, "{:?}", upsert.body);
    assert_eq!(upsert.body["errors"][0]["field"], "onConflict");
    let count = app
        .get("/api/data/app/people?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 3);

    // Out: RFC 4180, the caller's rows and columns, NULL empty, "" empty text.
    let (status, kind, text) = export(&app, &hr, "sort=id").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(kind.starts_with("text/csv"), "{kind}");
    assert_eq!(
        text,
        "id,name,team,active,tags,meta\r\n\
        1,Ada,red,true,\"{a,b}\",\"{\"\"k\"\": 1}\"\r\n\
        2,\"Bo, \"\"the\"\"\nsecond\",red,false,,\r\n\
        3,\"\",red,,{},\r\n"
    );
    let (_, _, some) = export(
        &app,
        &hr,
        &format!(
            "select=id,name&limit=1&offset=1&filter={}",
            encode(r#"{"id":{"gte":1}}"#)
        ),
    )
    .await;
    assert_eq!(some, "id,name\r\n2,\"Bo, \"\"the\"\"\nsecond\"\r\n");
    for (query, field) in [
        ("aggregate=n:count()", "aggregate"),
        ("select=id,t:team(id)", "select"),
    ] {
        let (status, _, text) = export(&app, &hr, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["errors"][0]["field"], field, "{query}");
    }
}

#[tokio::test]
async fn a_large_export_streams_and_a_large_import_is_refused_whole() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    app.db
        .sql("INSERT INTO app.people (id, name, team) SELECT n, 'person ' || n, 'red' FROM generate_series(1, 50000) AS n")
        .await;
    let (status, _, text) = export(&app, &hr, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        text.lines().count(),
        50_001,
        "every row, past any page size"
    );
    assert!(text.ends_with("50000,person 50000,red,,,\r\n"));
    let small = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.import_max_bytes": 1023 } }),
        )
        .await;
    assert_eq!(
        small.status,
        StatusCode::BAD_REQUEST,
        "an integer >= 1024: {:?}",
        small.body
    );
    let limit = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.import_max_bytes": 1024 } }),
        )
        .await;
    assert_eq!(limit.status, StatusCode::OK, "{:?}", limit.body);
    let big: String = std::iter::once("id,name,team\n".to_owned())
        .chain((60_001..60_200).map(|n| format!("{n},someone,red\n")))
        .collect();
    let response = app
        .client
        .post(format!("{}/api/data/app/people", app.address))
        .bearer_auth(&hr)
        .header("Content-Type", "text/csv")
        .body(big)
        .send()
        .await
        .unwrap();
    let answer = TestApp::answer(response).await;
    assert_eq!(
        answer.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{:?}",
        answer.body
    );
    assert_eq!(answer.body["errors"][0]["code"], "PAYLOAD_TOO_LARGE");
    let count = app
        .get("/api/data/app/people?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 50_000);
}

/// A large import is staged as it is read and inserted in chunks: a row
/// the database refuses is the answer even when a later record is
/// malformed (the rows read before a malformed record are inserted before
/// it is answered), and each chunk is audited by its count and lines.
#[tokio::test]
async fn an_import_in_chunks_answers_its_first_bad_line_and_audits_each_chunk() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    let rows = |from: u32, to: u32| -> String {
        (from..to)
            .map(|n| format!("{n},person {n},red\n"))
            .collect()
    };
    // Line 600 breaks the name check (found by the database), line 1799
    // has a bad id (found as it is read, after line 600 was staged).
    let body = format!(
        "id,name,team\n{}599,bad,red\n{}five,x,red\n{}",
        rows(1, 599),
        rows(600, 1798),
        rows(1799, 2500)
    );
    let answer = import(&app, &hr, body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
    assert_eq!(answer.body["errors"][0]["code"], "CHECK_VIOLATION");
    assert_eq!(answer.body["meta"]["line"], 600, "{:?}", answer.body);
    let body = format!("id,name,team\n{}five,x,red\n", rows(1, 1998));
    let answer = import(&app, &hr, body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
    assert_eq!(answer.body["errors"][0]["field"], "id", "{:?}", answer.body);
    assert_eq!(answer.body["meta"]["line"], 1999, "{:?}", answer.body);
    let count = app
        .get("/api/data/app/people?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 0, "nothing inserted");

    // Inserted 100,000 rows a statement (each staged run is 1,000).
    let done = import(&app, &hr, format!("id,name,team\n{}", rows(1, 120_002))).await;
    assert_eq!(done.status, StatusCode::CREATED, "{:?}", done.body);
    assert_eq!(done.data(), &json!({ "inserted": 120_001 }));
    let audit = app
        .get("/admin/api/audit?action=data.import&limit=10", &admin)
        .await;
    let mut chunks: Vec<(Value, Value)> = audit
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            assert!(entry["details"].get("keys").is_none(), "{entry}");
            (
                entry["details"]["lines"].clone(),
                entry["details"]["count"].clone(),
            )
        })
        .collect();
    chunks.sort_by_key(|(lines, _)| lines[0].as_u64());
    assert_eq!(
        chunks,
        [
            (json!([2, 100_001]), json!(100_000)),
            (json!([100_002, 120_002]), json!(20_001)),
        ]
    );
}

/// A header of 1,600 names (the most a record holds): the staged rows
/// need one more column for the line, so the import is refused before
/// anything is staged.
#[tokio::test]
async fn a_header_of_1600_columns_is_refused() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    let header: Vec<String> = (0..1600).map(|i| format!("c{i}")).collect();
    let answer = import(&app, &hr, format!("{}\n", header.join(","))).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
    assert_eq!(answer.code(), "INVALID_PAYLOAD");
    let message = answer.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("at most 1599"), "{message}");
}

/// A refused row far from the rows before it (a run of blank lines
/// between): found by halving the lines, not by trying each line, and
/// answered with its line; nothing inserted.
#[tokio::test]
async fn a_refused_row_after_many_blank_lines_is_found_at_once() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    let body = format!("id,name,team\n1,a,red\n{}1,b,red\n", "\n".repeat(200_000));
    let started = std::time::Instant::now();
    let answer = import(&app, &hr, body).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{:?}", answer.body);
    assert_eq!(answer.body["meta"]["line"], 200_003, "{:?}", answer.body);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let count = app
        .get("/api/data/app/people?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 0, "nothing inserted");
}

/// A client that goes away in the middle of an import, with chunks sent:
/// nothing is inserted and no transaction stays open.
#[tokio::test]
async fn an_import_whose_client_goes_away_leaves_nothing() {
    use tokio::io::AsyncWriteExt;
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    let rows: String = (1..3000).map(|n| format!("{n},person {n},red\n")).collect();
    // The body announced is far longer than what is sent.
    let head = format!(
        "POST /api/data/app/people HTTP/1.1\r\nHost: tessera\r\n\
         Authorization: Bearer {hr}\r\nContent-Type: text/csv\r\n\
         Content-Length: 10000000\r\n\r\nid,name,team\n"
    );
    let mut socket = tokio::net::TcpStream::connect(app.address.trim_start_matches("http://"))
        .await
        .unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(rows.as_bytes()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    drop(socket);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let open = app
            .db
            .sql(
                "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
            )
            .await;
        if open.as_deref() == Some("0") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a transaction stays open: {open:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let count = app
        .get("/api/data/app/people?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 0, "nothing inserted");
}

/// A change of the shared state during an import (another session signs
/// out, which moves the `auth` version) does not lose it: the caller is
/// resolved again and the rows go on into the same transaction.
#[tokio::test]
async fn an_import_goes_on_when_the_shared_state_moves_under_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, hr) = people(&app, &admin).await;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(4);
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (piece, receiver))
    });
    let request = tokio::spawn(
        app.client
            .post(format!("{}/api/data/app/people", app.address))
            .bearer_auth(&hr)
            .header("Content-Type", "text/csv")
            .body(reqwest::Body::wrap_stream(stream))
            .send(),
    );
    let rows = |from: u32, to: u32| -> String {
        (from..to)
            .map(|n| format!("{n},person {n},red\n"))
            .collect()
    };
    sender
        .send(Ok(format!("id,name,team\n{}", rows(1, 1500))))
        .await
        .unwrap();
    // The first rows are staged (the import's session is in its COPY, or
    // just out of it); another session ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while app
        .db
        .sql(
            "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() \
             AND xact_start IS NOT NULL AND (query LIKE 'COPY pg_temp.%' \
             OR query LIKE '%set_config(''statement_timeout''%')",
        )
        .await
        .as_deref()
        == Some("0")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first rows were never staged"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let other = app.admin_session().await;
    let out = app.post("/api/auth/logout", &other, json!({})).await;
    assert!(out.status.is_success(), "{:?}", out.body);
    sender.send(Ok(rows(1500, 3000))).await.unwrap();
    drop(sender);
    let answer = TestApp::answer(request.await.unwrap().unwrap()).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.data(), &json!({ "inserted": 2999 }));
}

/// Each field is read as its column's type, modifier included, as a JSON
/// insert reads it: a too-long varchar is refused (never cut), numerics
/// and timestamps are rounded as PostgreSQL rounds them, JSON is kept.
#[tokio::test]
async fn imported_fields_are_read_as_each_columns_type_and_modifier() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let codes = create_table(
        &app,
        &admin,
        "app",
        "codes",
        json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true },
        { "name": "code", "dataType": "varchar(3)" },
        { "name": "price", "dataType": "numeric(6,2)" },
        { "name": "at", "dataType": "timestamp(0)" },
        { "name": "doc", "dataType": "json" },
        { "name": "country", "dataType": "char(2)" },
        { "name": "flags", "dataType": "bit(3)" }]),
    )
    .await;
    expose(&app, &admin, &codes, &["GET", "POST"]).await;
    let post = |body: &'static str| {
        let request = app
            .client
            .post(format!("{}/api/data/app/codes", app.address))
            .bearer_auth(&admin)
            .header("Content-Type", "text/csv")
            .body(body);
        async move { TestApp::answer(request.send().await.unwrap()).await }
    };
    let done = post(
        "id,code,price,at,doc,country,flags\n\
         1,abc,1.005,2026-01-01 10:00:00.6,\"{\"\"b\"\": 1, \"\"a\"\":[1,2]}\",US,101\n\
         2,,,,,,\n",
    )
    .await;
    assert_eq!(done.status, StatusCode::CREATED, "{:?}", done.body);
    let rows = app.get("/api/data/app/codes?sort=id", &admin).await;
    assert_eq!(
        rows.data(),
        &json!([
            { "id": 1, "code": "abc", "price": 1.01, "at": "2026-01-01T10:00:01",
              "doc": { "b": 1, "a": [1, 2] }, "country": "US", "flags": "101" },
            { "id": 2, "code": null, "price": null, "at": null, "doc": null, "country": null, "flags": null }])
    );
    for body in [
        "id,code\n3,abc\n4,abcd\n",
        "id,price\n3,1\n4,12345.6\n",
        "id,country\n3,DE\n4,USA\n",
        "id,flags\n3,111\n4,1011\n",
    ] {
        let refused = post(body).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{body}: {:?}",
            refused.body
        );
        assert_eq!(
            refused.body["meta"]["line"], 3,
            "{body}: {:?}",
            refused.body
        );
    }
    // A NUL character, which no PostgreSQL text holds: refused on its line.
    let refused = post("id,code\n3,ab\n4,a\u{0}b\n").await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        refused.body["errors"][0]["field"], "code",
        "{:?}",
        refused.body
    );
    assert_eq!(refused.body["meta"]["line"], 3, "{:?}", refused.body);
    let count = app
        .get("/api/data/app/codes?aggregate=n:count()", &admin)
        .await;
    assert_eq!(count.data()[0]["n"], 2);
}
