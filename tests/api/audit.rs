//! The audit log records changes and sign-ins with their actor.

use reqwest::StatusCode;
use serde_json::json;
use testkit::{spawn_app, spawn_app_with_clock};

#[tokio::test]
async fn sign_ins_and_changes_are_audited_with_their_actor() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let me = app.get("/api/auth/me", &session).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.login_answer("ghost@example.com", "whatever").await;
    app.login_answer(testkit::ADMIN_EMAIL, "Hunter2-not-it")
        .await;

    let created = app
        .post(
            "/api/auth/tokens",
            &session,
            json!({ "name": "x", "lifetimeDays": 1, "plane": "ADMIN" }),
        )
        .await;
    let token = created.data()["token"].as_str().unwrap().to_owned();
    let token_id = created.data()["id"].as_str().unwrap().to_owned();
    let user = app
        .create_user(&token, "audited@example.com", "password-1", None)
        .await;

    let all = app.get("/admin/api/audit?limit=100", &session).await;
    assert_eq!(all.status, StatusCode::OK);
    let entries = all.data().as_array().unwrap().clone();
    let find = |action: &str| {
        entries
            .iter()
            .filter(|e| e["action"] == action)
            .cloned()
            .collect::<Vec<_>>()
    };

    let logins = find("auth.login");
    assert!(
        logins
            .iter()
            .all(|e| e["actorType"] == "user" && e["actorId"] == me.as_str())
    );
    assert!(!logins.is_empty());
    let failures = find("auth.login_failed");
    assert_eq!(failures.len(), 2);
    assert!(
        failures
            .iter()
            .any(|e| e["actorId"].is_null() && e["details"]["email"] == "ghost@example.com")
    );
    assert!(failures.iter().any(|e| e["actorId"] == me.as_str()));
    assert!(
        failures.iter().all(|e| !e.to_string().contains("Hunter2")),
        "passwords never reach the log"
    );

    let token_created = &find("token.create")[0];
    assert_eq!(token_created["actorType"], "user");
    assert_eq!(token_created["target"], format!("token:{token_id}"));
    let user_created = &find("user.create")[0];
    assert_eq!(user_created["actorType"], "token");
    assert_eq!(user_created["actorId"], token_id.as_str());
    assert_eq!(user_created["target"], format!("user:{user}"));
    assert!(
        user_created["ip"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1")
    );

    // Filters and paging.
    let only = app
        .get("/admin/api/audit?action=user.create", &session)
        .await;
    assert!(
        only.data()
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["action"] == "user.create")
    );
    let by_token = app
        .get(&format!("/admin/api/audit?actorId={token_id}"), &session)
        .await;
    assert_eq!(by_token.data().as_array().unwrap().len(), 1);
    let first_page = app.get("/admin/api/audit?limit=2", &session).await;
    let last = first_page.data()[1]["id"].as_str().unwrap().to_owned();
    let next = app
        .get(&format!("/admin/api/audit?limit=2&before={last}"), &session)
        .await;
    assert_eq!(next.data()[0]["id"], entries[2]["id"]);
    let bad = app.get("/admin/api/audit?before=yesterday", &session).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.code(), "INVALID_QUERY");
    assert_eq!(bad.body["errors"][0]["field"], "before");
    let long = app
        .get(
            &format!("/admin/api/audit?action={}", "a".repeat(101)),
            &session,
        )
        .await;
    assert_eq!(long.code(), "INVALID_QUERY");
    assert_eq!(long.body["errors"][0]["field"], "action");
    let longest = app
        .get(
            &format!("/admin/api/audit?action={}", "a".repeat(100)),
            &session,
        )
        .await;
    assert_eq!(longest.status, StatusCode::OK);
}

#[tokio::test]
async fn settings_changes_are_audited() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &session,
        json!({ "data": { "auth.lockout_minutes": 20 } }),
    )
    .await;
    let entries = app
        .get("/admin/api/audit?action=settings.update", &session)
        .await;
    assert_eq!(
        entries.data()[0]["details"]["keys"],
        json!(["auth.lockout_minutes"])
    );
}

#[tokio::test]
async fn entries_are_dated_by_the_services_clock() {
    let app = spawn_app_with_clock().await;
    app.advance(chrono::Duration::days(400));
    let session = app.admin_session().await;
    let clock = app.clock.as_ref().unwrap();
    let role = app
        .post(
            "/admin/api/roles",
            &session,
            json!({ "data": { "name": "Dated", "apiAccess": true } }),
        )
        .await;
    assert_eq!(role.status, StatusCode::CREATED);
    let entries = app
        .get("/admin/api/audit?action=role.create", &session)
        .await;
    let at = entries.data()[0]["at"].as_str().unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc();
    // Stored to the microsecond; 400 days from the real time.
    let now = kernel::Clock::now(clock.as_ref());
    assert!(
        (at - now).abs() < chrono::Duration::milliseconds(1),
        "{at} {now}"
    );
}
