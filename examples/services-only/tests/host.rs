//! The services-only host: the report reads through the domain services
//! what the token's owner may read through the Data API, and nothing more;
//! its own workers send an invitation and run a scheduled workflow, with
//! no HTTP server in the process.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly"
)]

use std::sync::Arc;
use std::time::Duration;

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

#[tokio::test]
async fn the_hosts_workers_send_an_invitation_and_run_a_schedule() {
    let db = testkit::TestDatabase::create().await;
    let smtp = testkit::SmtpSink::start().await;
    let mut config = services::ServicesConfig::for_database(&db.url);
    config.smtp_url = Some(smtp.url());
    config.mail_poll = Duration::from_millis(100);
    config.files = services::files::BlobsConfig::Local(
        std::env::temp_dir()
            .join("tessera-test-files")
            .join(&db.name),
    );
    let services = services::Services::start(&config, Arc::new(services::kernel::SystemClock))
        .await
        .unwrap();
    services
        .bootstrap_admin("owner@example.com", "owner-password-1")
        .await
        .unwrap();
    let origin = services::auth::Origin {
        ip: None,
        user_agent: None,
    };
    let (admin, _) = services
        .sign_in
        .login("owner@example.com", "owner-password-1", origin)
        .await
        .unwrap();
    let workers = services.start_workers().unwrap();

    services_only_example::invite(&services, &admin, "new@example.com")
        .await
        .unwrap();
    let email = smtp
        .wait_for(
            "new@example.com",
            "accept-invitation",
            Duration::from_secs(20),
        )
        .await;
    assert!(email.token("accept-invitation").is_some(), "{}", email.text);

    let id = services_only_example::schedule(&services, &admin, "heartbeat", "*/1 * * * * *")
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    // Finished runs only: the newest tick's may still be running.
    let runs = loop {
        let mut runs = services.workflows.runs(id, 10, 0).await.unwrap();
        runs.retain(|run| run.finished_at.is_some());
        if runs.len() >= 2 || tokio::time::Instant::now() > deadline {
            break runs;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(runs.len() >= 2, "the schedule finished {} runs", runs.len());
    for run in &runs {
        assert!(run.scheduled_at.is_some());
        assert_eq!(run.input["scheduledAt"], run.result, "{run:?}");
    }
    // Stopped, the workers start nothing more.
    workers.stop(Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = services.workflows.runs(id, 100, 0).await.unwrap().len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        services.workflows.runs(id, 100, 0).await.unwrap().len(),
        after
    );

    // A person who is no administrator schedules and invites nothing.
    let person = services::auth::CreateUser {
        email: "person@example.com".into(),
        name: None,
        password: Some("person-password-1".into()),
        role_ids: None,
        email_verified: Some(true),
        timezone: None,
    };
    services
        .accounts
        .create_user(services::audit::Actor::SYSTEM, person, None)
        .await
        .unwrap();
    let origin = services::auth::Origin {
        ip: None,
        user_agent: None,
    };
    let (session, _) = services
        .sign_in
        .login("person@example.com", "person-password-1", origin)
        .await
        .unwrap();
    let refused = services_only_example::schedule(&services, &session, "x", "* * * * * *").await;
    assert!(refused.is_err());
    let refused = services_only_example::invite(&services, &session, "other@example.com").await;
    assert!(refused.is_err());
}
