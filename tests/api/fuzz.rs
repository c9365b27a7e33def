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
