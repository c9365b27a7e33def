//! The reporting job reads through the domain services what the token's
//! owner may read through the Data API, and nothing more.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly"
)]

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn the_report_holds_the_rows_the_token_owner_may_read() {
    let app = testkit::spawn_app().await;
    let admin = app.admin_session().await;
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
            json!({ "data": { "exposedMethods": ["GET"] } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK, "{:?}", exposed.body);
    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Readers", "apiAccess": true } }),
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
    let reader = app
        .create_user(
            &admin,
            "reader@example.com",
            "reader-password-1",
            Some(vec![role]),
        )
        .await;
    let session = app.login("reader@example.com", "reader-password-1").await;
    let token = app.create_token(&session, "API").await;
    let other = uuid::Uuid::now_v7();
    for (owner, title) in [
        (reader.as_str(), "mine 1"),
        (&other.to_string(), "theirs"),
        (reader.as_str(), "mine 2"),
    ] {
        app.db
            .sql(&format!(
                "INSERT INTO app.notes (owner_id, title) VALUES ('{owner}', '{title}')"
            ))
            .await;
    }

    // A second process over the same database: the services alone.
    let services = services::Services::start(
        &app.config.services(),
        Arc::new(services::kernel::SystemClock),
    )
    .await
    .unwrap();
    let rows = services_only_example::report(&services, &token, ("app", "notes"), 10)
        .await
        .unwrap();
    let titles: Vec<&str> = rows.iter().map(|r| r["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["mine 2", "mine 1"]);

    // A credential that is no token reads nothing.
    let refused =
        services_only_example::report(&services, "tsr_not-a-token", ("app", "notes"), 10).await;
    assert!(refused.is_err());
}
