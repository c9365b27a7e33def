//! Schema-based fuzzing with schemathesis (PyPI, installed by `cargo xtask
//! test`) against the Admin document and the Data document of a role that
//! is not Administrators: no 5xx, every answer within its documented
//! statuses, content types and schemas, every error in the envelope.
//! `TESSERA_FUZZ_SECONDS` sets the time per document and `TESSERA_FUZZ_SEED`
//! the seed (`cargo xtask fuzz-api --minutes N` runs it longer, seeded anew).

use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{create_table, member, open_to_new_role};

/// Seconds schemathesis spends on each document unless told otherwise.
const DEFAULT_SECONDS: u64 = 45;

fn seconds() -> u64 {
    std::env::var("TESSERA_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECONDS)
}

/// `TESSERA_FUZZ_SEED`, else 1: the CI run repeats itself; `cargo xtask
/// fuzz-api` passes a new seed each time.
fn seed() -> String {
    std::env::var("TESSERA_FUZZ_SEED").unwrap_or_else(|_| "1".into())
}

/// Runs schemathesis on `document` (written to a file) against the app as
/// `bearer`; fails the test with its report unless it passes.
async fn fuzz(app: &TestApp, name: &str, document: &Value, bearer: &str) {
    let dir = std::env::temp_dir().join(format!("tessera-fuzz-{}", app.db.name));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_vec(document).unwrap()).unwrap();
    // Asynchronously: the app under test serves from this test's runtime.
    let mut command = tokio::process::Command::new("schemathesis");
    command
        .arg("run")
        .arg(&file)
        .args(["--url", &app.address])
        .args(["--header", &format!("Authorization: Bearer {bearer}")])
        .args(["--checks", "all"])
        // Unknown methods on known paths answer 404 (docs/decisions.md);
        // a schema cannot say which ids exist or which names are taken, so
        // a schema-valid body may still be refused with 400, 404 or 409.
        .args([
            "--exclude-checks",
            "unsupported_method,positive_data_acceptance",
        ])
        .args(["--max-time", &seconds().to_string()])
        // One worker: hypothesis describes its filters with `ast.parse`,
        // which CPython 3.11 does not allow on two threads at once.
        .args(["--workers", "1", "--no-color", "--seed", &seed()])
        .args(["--suppress-health-check", "all"])
        .args(["--warnings", "off"])
        .env("NO_COLOR", "1")
        // Its cache goes beside the files, not into the checkout.
        .current_dir(&dir);
    report(command.output().await.unwrap(), name, &dir);
}

fn report(output: std::process::Output, name: &str, dir: &Path) {
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis on the {name} document failed ({}; files in {}):\n{text}\n{}",
        output.status,
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{text}");
}

#[tokio::test]
async fn schemathesis_finds_nothing_in_either_document() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "notes",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "title", "dataType": "text", "nullable": false },
            { "name": "score", "dataType": "numeric" },
            { "name": "done", "dataType": "boolean", "default": "false" },
            { "name": "due", "dataType": "timestamptz" },
            { "name": "tags", "dataType": "jsonb" }
        ]),
    )
    .await;
    let role = open_to_new_role(
        &app,
        &admin,
        &resource,
        "Writers",
        &["read", "create", "update", "delete"],
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, writer) = member(&app, &admin, "writer@example.com", &role).await;
    app.db
        .sql("INSERT INTO app.notes (title, score) SELECT 'n' || i, i FROM generate_series(1, 20) i RETURNING 1")
        .await;

    let data = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    assert_eq!(data.status, StatusCode::OK);
    fuzz(&app, "data", &data.body, &writer).await;

    // The administrator fuzzes with a token of the ADMIN plane: session-only
    // routes then answer 403 instead of ending the credential under test.
    // MCP is on, so that its endpoint is fuzzed too.
    let token = app.create_token(&admin, "ADMIN").await;
    let mcp = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "mcp.enabled": true } }),
        )
        .await;
    assert_eq!(mcp.status, StatusCode::OK, "{:?}", mcp.body);
    let document = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(document.status, StatusCode::OK);
    fuzz(&app, "admin", &document.body, &token).await;
}

/// What schemathesis found, kept as plain checks that need no fuzzer.
#[tokio::test]
async fn what_the_fuzzer_found_stays_fixed() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let columns = json!([{ "name": "id", "dataType": "bigint", "primaryKey": true }]);
    let resource = create_table(&app, &admin, "app", "things", columns).await;
    let role = open_to_new_role(
        &app,
        &admin,
        &resource,
        "Readers",
        &["read"],
        Value::Null,
        Value::Null,
    )
    .await;

    // A 405 names the exposed methods of its own path only.
    for (path, allowed) in [
        ("/api/data/app/things", "GET, POST"),
        ("/api/data/app/things/1", "GET, PATCH, DELETE"),
    ] {
        let answer = app
            .client
            .request(reqwest::Method::OPTIONS, format!("{}{path}", app.address))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(answer.headers()["allow"], allowed, "{path}");
    }

    // Refusals every operation can give are declared where they apply.
    let document = app.get("/admin/api/openapi", &admin).await.body;
    let operation = |path: &str, method: &str| document["paths"][path][method]["responses"].clone();
    for status in ["400", "401", "403", "413", "415", "503"] {
        assert!(
            operation("/admin/api/roles/{id}", "patch")[status].is_object(),
            "{status}"
        );
    }
    assert!(operation("/admin/api/roles/{id}", "patch")["409"].is_object());
    assert!(operation("/api/auth/login", "post")["429"].is_object());
    assert!(operation("/healthz", "get")["503"].is_null());

    // An empty paging value counts as not given, and the Data document says so.
    let data = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await
        .body;
    let list = &data["paths"]["/api/data/app/things"]["get"];
    let count = list["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "count")
        .unwrap();
    assert_eq!(count["schema"]["enum"], json!(["exact", ""]));
    assert!(list["responses"]["503"].is_object());
    let empty = app
        .get("/api/data/app/things?count=&limit=&offset=", &admin)
        .await;
    assert_eq!(empty.status, StatusCode::OK, "{:?}", empty.body);
}
