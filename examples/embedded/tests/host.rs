//! The example host serves its own route and Tessera's under one server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly"
)]

use reqwest::StatusCode;
use serde_json::json;
use tessera::Config;
use testkit::{SmtpSink, TestApp, TestDatabase};

/// The example host on a fresh database, as a [`TestApp`] whose address is
/// Tessera's mount point; answers it with the host's own origin.
async fn start_host() -> (TestApp, String) {
    let db = TestDatabase::create().await;
    let smtp = SmtpSink::start().await;
    let mut config = Config::for_database(&db.url);
    config.public_url = format!("http://host.test{}", embedded_example::BASE_PATH);
    config.smtp_url = Some(smtp.url());
    config.files = tessera::files::BlobsConfig::Local(
        std::env::temp_dir()
            .join("tessera-test-files")
            .join(&db.name),
    );
    let host = embedded_example::start(&config, "127.0.0.1:0")
        .await
        .unwrap();
    let origin = format!("http://127.0.0.1:{}", host.port);
    tokio::spawn(host.server);
    host.services
        .accounts
        .ensure_admin(testkit::ADMIN_EMAIL, testkit::ADMIN_PASSWORD, None)
        .await
        .unwrap();
    let app = TestApp {
        address: format!("{origin}{}", embedded_example::BASE_PATH),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        services: host.services,
        clock: None,
        smtp,
        db,
        config,
        pooler: None,
    };
    (app, origin)
}

/// `GET {origin}/my/notes` with `bearer`: status and body.
async fn my_notes(app: &TestApp, origin: &str, bearer: &str) -> (StatusCode, serde_json::Value) {
    let response = app
        .client
        .get(format!("{origin}/my/notes"))
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test]
async fn the_host_route_reads_under_the_callers_grants_beside_tessera_routes() {
    let (app, origin) = start_host().await;
    let admin = app.admin_session().await;

    // Through Tessera's routes under /backend: a table, its grant, two users.
    let table = app
        .post(
            "/admin/api/schema/app/tables",
            &admin,
            json!({ "data": { "name": "notes", "columns": [
                { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
                { "name": "owner_id", "dataType": "uuid", "nullable": false },
                { "name": "title", "dataType": "text", "nullable": false } ] } }),
        )
        .await;
    assert_eq!(table.status, StatusCode::CREATED, "{:?}", table.body);
    let resource = table.data()["resourceId"].as_str().unwrap().to_owned();
    let exposed = app
        .patch(
            &format!("/admin/api/resources/{resource}"),
            &admin,
            json!({ "data": { "exposedMethods": ["GET", "POST"] } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK, "{:?}", exposed.body);
    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Writers", "apiAccess": true } }),
        )
        .await;
    let role = role.data()["id"].as_str().unwrap().to_owned();
    let granted = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": role, "resourceId": resource, "action": "read",
                "filter": { "owner_id": { "eq": "$USER.id" } } } }),
        )
        .await;
    assert_eq!(granted.status, StatusCode::CREATED, "{:?}", granted.body);
    let mut sessions = Vec::new();
    for email in ["alice@example.com", "bob@example.com"] {
        let id = app
            .create_user(&admin, email, "member-password-1", Some(vec![role.clone()]))
            .await;
        let session = app.login(email, "member-password-1").await;
        sessions.push((id, session));
    }
    let (alice, alice_session) = &sessions[0];
    let (bob, bob_session) = &sessions[1];
    for (owner, title) in [(alice, "a1"), (bob, "b1"), (alice, "a2")] {
        let row = app
            .post(
                "/api/data/app/notes",
                &admin,
                json!({ "data": { "owner_id": owner, "title": title } }),
            )
            .await;
        assert_eq!(row.status, StatusCode::CREATED, "{:?}", row.body);
    }

    // The host's own route: each caller gets exactly the rows their grant allows.
    let (status, body) = my_notes(&app, &origin, alice_session).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    assert_eq!(body["user"], json!(alice));
    let titles: Vec<&str> = body["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["a2", "a1"]);
    let (status, body) = my_notes(&app, &origin, bob_session).await;
    assert_eq!(status, StatusCode::OK, "{body:?}");
    assert_eq!(body["notes"].as_array().unwrap().len(), 1);
    assert_eq!(body["notes"][0]["title"], "b1");
    // Tessera's refusals keep Tessera's envelope.
    let (status, body) = my_notes(&app, &origin, "svc_not-a-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["errors"][0]["code"], "AUTHENTICATION_REQUIRED");
    // Tessera's own list route agrees with the host's.
    let listed = app.get("/api/data/app/notes?sort=-id", alice_session).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.data().as_array().unwrap().len(), 2);

    // Tessera stays under its path: the host's root is the host's.
    let outside = app
        .client
        .get(format!("{origin}/api/data/app/notes"))
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), StatusCode::NOT_FOUND);
    assert!(outside.text().await.unwrap().is_empty());
    // Inside it, an unknown path is Tessera's 404 envelope.
    let unknown = app.get("/no/such/route", &admin).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.code(), "NOT_FOUND");
    // The documents name the mount point as their server.
    let document = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(document.body["servers"][0]["url"], "/backend");
    let data_document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    assert_eq!(data_document.body["servers"][0]["url"], "/backend");
}
