//! The OpenAPI document and the browsable docs.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::spawn_app;

use crate::data::{create_table, expose, grant, open_to_new_role};

#[tokio::test]
async fn the_documents_follow_the_admin_api_rule() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "reader@example.com", "password-1", None)
        .await;
    let reader = app.login("reader@example.com", "password-1").await;
    let data = format!("/admin/api/openapi/data?role={}", crate::USERS_ROLE);
    for path in ["/admin/api/openapi", data.as_str()] {
        let anonymous = app.call(Method::GET, path, None, None).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(anonymous.code(), "AUTHENTICATION_REQUIRED");
        let refused = app.get(path, &reader).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(app.get(path, &admin).await.status, StatusCode::OK, "{path}");
    }
    // The old place of the Swagger UI is gone.
    let old = app.call(Method::GET, "/admin/api/docs/", None, None).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
}

/// That the document lists exactly the mounted routes is proved against the
/// router itself (`tessera-http`'s unit test); here, the served document.
#[tokio::test]
async fn the_served_document_describes_bodies_answers_and_security() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let doc = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert!(doc.body["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc.body["paths"].as_object().unwrap();
    assert!(paths["/admin/api/openapi"].get("get").is_some());
    assert!(doc.body["components"]["securitySchemes"]["bearer"].is_object());
    let create = &paths["/admin/api/schema/{schema}/tables"]["post"];
    assert!(
        create["requestBody"].is_object() && create["responses"]["201"].is_object(),
        "bodies and answers are documented"
    );
}

#[tokio::test]
async fn the_docs_page_is_served_without_downloads() {
    let app = spawn_app().await;
    let redirect = app
        .client
        .get(format!("{}/admin/docs", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), StatusCode::PERMANENT_REDIRECT);
    let page = app
        .client
        .get(format!("{}/admin/docs/", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("swagger-ui"));
    let bundle = app
        .client
        .get(format!("{}/admin/docs/swagger-ui-bundle.js", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(bundle.status(), StatusCode::OK);
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn succeeds(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start ({e}); `cargo xtask test` installs it"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Writes `document` to `dir/name.json`, checks it with openapi-spec-validator
/// (OpenAPI 3.1, every finding) and generates a TypeScript client from it
/// into `dir/name/` with @hey-api/openapi-ts.
fn validate_and_generate(client: &Path, dir: &Path, name: &str, document: &Value) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_vec_pretty(document).unwrap()).unwrap();
    succeeds(
        Command::new("python3")
            .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
            .args(["--validation-errors", "all", "--subschema-errors", "all"])
            .arg(&file),
        &format!("openapi-spec-validator on the {name} document"),
    );
    succeeds(
        Command::new(client.join("node_modules/.bin/openapi-ts"))
            .current_dir(client)
            .args([
                "--silent",
                "--no-log-file",
                "--client",
                "@hey-api/client-fetch",
            ])
            .arg("--input")
            .arg(&file)
            .arg("--output")
            .arg(dir.join(name)),
        &format!("openapi-ts on the {name} document"),
    );
    // The types alone, with the other standard generator; tsc checks them too.
    succeeds(
        Command::new(client.join("node_modules/.bin/openapi-typescript"))
            .current_dir(client)
            .arg(&file)
            .arg("--output")
            .arg(dir.join(format!("{name}-types.ts"))),
        &format!("openapi-typescript on the {name} document"),
    );
}

#[tokio::test]
async fn the_documents_are_valid_and_generate_a_typed_client() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let columns = json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
        { "name": "title", "dataType": "text", "nullable": false },
        { "name": "done", "dataType": "boolean", "default": "false" },
    ]);
    let resource = create_table(&app, &admin, "app", "notes", columns).await;
    let role = open_to_new_role(
        &app,
        &admin,
        &resource,
        "Editors",
        &["read", "create", "update", "delete"],
        Value::Null,
        Value::Null,
    )
    .await;
    // Comments on notes: the example embeds them, and writes a note with
    // its first comment in one batch.
    let comments = create_table(&app, &admin, "app", "comments", json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
        { "name": "note_id", "dataType": "bigint", "foreignKey": { "targetTable": "notes", "targetColumn": "id" } },
        { "name": "body", "dataType": "text" },
    ]))
    .await;
    expose(&app, &admin, &comments, &["GET", "POST"]).await;
    for action in ["read", "create"] {
        grant(
            &app,
            &admin,
            &role,
            &comments,
            action,
            Value::Null,
            Value::Null,
        )
        .await;
    }
    let admin_document = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(admin_document.status, StatusCode::OK);
    let data_document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    assert_eq!(data_document.status, StatusCode::OK);

    // Every operation id is given, and unique in its document.
    for document in [&admin_document.body, &data_document.body] {
        let mut ids = std::collections::HashSet::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str();
                assert!(
                    id.is_some_and(|id| ids.insert(id.to_owned())),
                    "{method} {path}: {id:?}"
                );
            }
        }
    }

    // The generated client lands beside the example that imports it; the
    // example is type-checked against it.
    let tests_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let client = PathBuf::from(tests_dir).join("../clients/typescript");
    let generated = client.join("generated");
    std::fs::create_dir_all(&generated).unwrap();
    validate_and_generate(&client, &generated, "admin", &admin_document.body);
    validate_and_generate(&client, &generated, "data", &data_document.body);
    succeeds(
        Command::new(client.join("node_modules/.bin/tsc"))
            .current_dir(&client)
            .args(["--project", "tsconfig.json"]),
        "tsc on the generated client and the example",
    );
}
