//! The restore drill of docs/operations.md ("Backup"): the documented
//! `pg_dump` and `tar` of a populated instance, restored with the
//! documented `pg_restore` into a new database and the files put back, and
//! a new instance over them serves everything the first one did.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;
use testkit::{TestApp, TestDatabase, spawn_app, spawn_app_with};

/// Runs `program` with `args`; fails the test with its output if it fails.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} cannot start: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The folder an app keeps its files in.
fn files_dir(app: &TestApp) -> std::path::PathBuf {
    match &app.config.files {
        files::BlobsConfig::Local(dir) => dir.clone(),
        other => panic!("a test app keeps its files locally, not in {other:?}"),
    }
}

#[tokio::test]
async fn a_backup_restored_into_a_new_database_serves_everything() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // A table under a grant's row filter, a person with a password, a
    // token and rows, an administrator's file, a published workflow and a
    // changed setting.
    let resource = super::data::keyed_table(
        &app,
        &admin,
        "notes",
        json!([{ "name": "owner_id", "dataType": "uuid", "nullable": false },
               { "name": "title", "dataType": "text", "nullable": false }]),
        &["GET", "POST"],
    )
    .await;
    let role = super::data::open_to_new_role(
        &app,
        &admin,
        &resource,
        "Writers",
        &["read", "create"],
        json!({ "owner_id": { "eq": "$USER.id" } }),
        serde_json::Value::Null,
    )
    .await;
    let writer_id = app
        .create_user(
            &admin,
            "writer@example.com",
            "writer-password-1",
            Some(vec![role]),
        )
        .await;
    let writer = app.login("writer@example.com", "writer-password-1").await;
    let token = app.create_token(&writer, "API").await;
    for title in ["first", "second"] {
        let made = app
            .post(
                "/api/data/app/notes",
                &token,
                json!({ "data": { "title": title, "owner_id": writer_id } }),
            )
            .await;
        assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    }
    let part = reqwest::multipart::Part::bytes(b"kept across the restore".to_vec())
        .file_name("kept.txt")
        .mime_str("text/plain")
        .unwrap();
    let uploaded = TestApp::answer(
        app.client
            .post(format!("{}/api/files", app.address))
            .bearer_auth(&admin)
            .multipart(reqwest::multipart::Form::new().part("file", part))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(uploaded.status, StatusCode::CREATED, "{:?}", uploaded.body);
    let file = uploaded.data()["id"].as_str().unwrap().to_owned();
    let me = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let steps = json!([{ "id": "done", "type": "finish", "result": { "hello": "{{start.data.body.name}}" } }]);
    super::workflows::published(
        &app,
        &admin,
        "greet",
        json!({ "type": "webhook", "access": "public", "executeAs": me }),
        steps,
    )
    .await;
    let setting = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.session_ttl_hours": 48 } }),
        )
        .await;
    assert_eq!(setting.status, StatusCode::OK, "{:?}", setting.body);

    // The backup, as documented: the database, then the files.
    let work = std::env::temp_dir().join(format!("tessera-restore-{}", app.db.name));
    std::fs::create_dir_all(&work).unwrap();
    let dump = work.join("tessera.dump");
    run(
        "pg_dump",
        &[
            "--format=custom",
            "--file",
            dump.to_str().unwrap(),
            &app.db.url,
        ],
    );
    let files = files_dir(&app);
    let (parent, folder) = (files.parent().unwrap(), files.file_name().unwrap());
    let archive = work.join("tessera-files.tar.gz");
    run(
        "tar",
        &[
            "-C",
            parent.to_str().unwrap(),
            "-czf",
            archive.to_str().unwrap(),
            folder.to_str().unwrap(),
        ],
    );

    // The restore, on a new database and a new files folder.
    let restored = TestDatabase::empty().await;
    run(
        "pg_restore",
        &[
            "--clean",
            "--if-exists",
            "--dbname",
            &restored.url,
            dump.to_str().unwrap(),
        ],
    );
    let new_files = work.join("files");
    std::fs::create_dir_all(&new_files).unwrap();
    run(
        "tar",
        &[
            "-C",
            new_files.to_str().unwrap(),
            "-xzf",
            archive.to_str().unwrap(),
        ],
    );
    let restored_files = new_files.join(folder);
    let url = restored.url.clone();
    let second = spawn_app_with(move |config| {
        config.database_url = url;
        config.files = files::BlobsConfig::Local(restored_files);
    })
    .await;

    // The person signs in with the password they had; their token works;
    // the row filter still holds and writes continue after the rows there.
    let again = second
        .login("writer@example.com", "writer-password-1")
        .await;
    let rows = second.get("/api/data/app/notes?sort=id", &token).await;
    assert_eq!(rows.status, StatusCode::OK, "{:?}", rows.body);
    let titles: Vec<&str> = rows
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["first", "second"]);
    let third = second
        .post(
            "/api/data/app/notes",
            &again,
            json!({ "data": { "title": "third", "owner_id": writer_id } }),
        )
        .await;
    assert_eq!(third.status, StatusCode::CREATED, "{:?}", third.body);
    assert_eq!(
        third.data()["id"],
        3,
        "the identity goes on after the restored rows"
    );
    // The file reads back, checked against its stored hash.
    let admin_again = second.admin_session().await;
    let content = second
        .client
        .get(format!("{}/api/files/{file}", second.address))
        .bearer_auth(&admin_again)
        .send()
        .await
        .unwrap();
    assert_eq!(content.status(), StatusCode::OK);
    assert_eq!(content.text().await.unwrap(), "kept across the restore");
    // The published workflow answers; the setting is the one set.
    let greeted = TestApp::answer(
        second
            .client
            .post(format!("{}/api/workflows/greet/webhook", second.address))
            .json(&json!({ "name": "Ada" }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(greeted.status, StatusCode::OK, "{:?}", greeted.body);
    assert_eq!(
        greeted.body["data"]["result"]["hello"], "Ada",
        "{:?}",
        greeted.body
    );
    let settings = second.get("/admin/api/settings", &admin_again).await;
    assert_eq!(
        settings.data()["auth.session_ttl_hours"],
        48,
        "{:?}",
        settings.body
    );
    let _ = std::fs::remove_dir_all(&work);
}
