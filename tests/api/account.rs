//! Account lifecycle over real SMTP: registration, reset, change, verification, invitations.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{ADMIN_EMAIL, TestApp, spawn_app, spawn_app_with_clock};

use crate::USERS_ROLE;

async fn public(app: &TestApp, path: &str, body: Value) -> testkit::Answer {
    app.call(Method::POST, path, None, Some(body)).await
}

async fn set(app: &TestApp, admin: &str, settings: Value) {
    let answer = app
        .patch("/admin/api/settings", admin, json!({ "data": settings }))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
}

#[tokio::test]
async fn registration_follows_the_setting() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let closed = public(
        &app,
        "/api/auth/register",
        json!({ "email": "new@example.com", "password": "password-1" }),
    )
    .await;
    assert_eq!(closed.status, StatusCode::FORBIDDEN);
    assert_eq!(closed.code(), "PERMISSION_DENIED");

    set(&app, &admin, json!({ "auth.registration_enabled": true })).await;
    let open = public(
        &app,
        "/api/auth/register",
        json!({ "email": "new@example.com", "password": "password-1", "name": "New" }),
    )
    .await;
    assert_eq!(open.status, StatusCode::CREATED);
    assert_eq!(open.data()["email"], "new@example.com");
    assert_eq!(open.data()["emailVerified"], false);
    assert_eq!(open.data()["roles"][0]["id"], USERS_ROLE);
    app.login("new@example.com", "password-1").await;

    let taken = public(
        &app,
        "/api/auth/register",
        json!({ "email": "NEW@example.com", "password": "password-1" }),
    )
    .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    let short = public(
        &app,
        "/api/auth/register",
        json!({ "email": "b@example.com", "password": "short" }),
    )
    .await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    assert_eq!(short.body["errors"][0]["field"], "password");
    let bad = public(
        &app,
        "/api/auth/register",
        json!({ "email": "nope", "password": "password-1" }),
    )
    .await;
    assert_eq!(bad.body["errors"][0]["field"], "email");
}

#[tokio::test]
async fn registration_with_verification_required_sends_a_working_link() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.registration_enabled": true, "auth.email_verification_required": true }),
    )
    .await;
    let created = public(
        &app,
        "/api/auth/register",
        json!({ "email": "verify@example.com", "password": "password-1" }),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        app.login_answer("verify@example.com", "password-1")
            .await
            .code(),
        "EMAIL_NOT_VERIFIED"
    );

    let email = app
        .smtp
        .wait_for(
            "verify@example.com",
            "verify-email",
            Duration::from_secs(20),
        )
        .await;
    let link = email.link("verify-email").unwrap();
    assert!(
        link.starts_with("http://tessera.test/admin/auth/verify-email?token="),
        "{link}"
    );
    let token = email.token("verify-email").unwrap();
    assert_eq!(
        public(&app, "/api/auth/email/verify", json!({ "token": token }))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    app.login("verify@example.com", "password-1").await;
    // Single use.
    let again = public(&app, "/api/auth/email/verify", json!({ "token": token })).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert_eq!(again.code(), "INVALID_TOKEN");
}

#[tokio::test]
async fn forgot_and_reset_password() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "reset@example.com", "password-1", None)
        .await;
    let old_session = app.login("reset@example.com", "password-1").await;

    for email in ["reset@example.com", "nobody@example.com", "not-an-email"] {
        let answer = public(&app, "/api/auth/password/forgot", json!({ "email": email })).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{email}");
        assert!(answer.body.is_null());
    }
    let token = app
        .emailed_token("reset@example.com", "reset-password")
        .await;

    let short = public(
        &app,
        "/api/auth/password/reset",
        json!({ "token": token, "password": "short" }),
    )
    .await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST);
    assert_eq!(short.body["errors"][0]["field"], "password");
    let done = public(
        &app,
        "/api/auth/password/reset",
        json!({ "token": token, "password": "password-2" }),
    )
    .await;
    assert_eq!(done.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/api/auth/me", &old_session).await.code(),
        "SESSION_EXPIRED"
    );
    assert_eq!(
        app.login_answer("reset@example.com", "password-1")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    app.login("reset@example.com", "password-2").await;

    let reused = public(
        &app,
        "/api/auth/password/reset",
        json!({ "token": token, "password": "password-3" }),
    )
    .await;
    assert_eq!(reused.code(), "INVALID_TOKEN");
    for bad in ["", "garbage", &"x".repeat(300)] {
        let answer = public(
            &app,
            "/api/auth/password/reset",
            json!({ "token": bad, "password": "password-3" }),
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(answer.code(), "INVALID_TOKEN");
    }
    // No email went to the unknown address, and the outbox holds only real ones.
    assert!(
        app.smtp
            .emails()
            .iter()
            .all(|e| e.to == ["reset@example.com"])
    );
}

#[tokio::test]
async fn reset_links_expire_after_an_hour() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "late@example.com", "password-1", None)
        .await;
    public(
        &app,
        "/api/auth/password/forgot",
        json!({ "email": "late@example.com" }),
    )
    .await;
    let token = app
        .emailed_token("late@example.com", "reset-password")
        .await;
    app.advance(chrono::Duration::minutes(61));
    let late = public(
        &app,
        "/api/auth/password/reset",
        json!({ "token": token, "password": "password-2" }),
    )
    .await;
    assert_eq!(late.code(), "INVALID_TOKEN");
}

#[tokio::test]
async fn emails_wait_in_the_outbox_while_smtp_is_down() {
    let mut app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "patient@example.com", "password-1", None)
        .await;
    app.smtp.stop();
    public(
        &app,
        "/api/auth/password/forgot",
        json!({ "email": "patient@example.com" }),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(app.smtp.emails().is_empty());
    app.smtp.restart().await;
    let token = app
        .emailed_token("patient@example.com", "reset-password")
        .await;
    let done = public(
        &app,
        "/api/auth/password/reset",
        json!({ "token": token, "password": "password-2" }),
    )
    .await;
    assert_eq!(done.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn password_change_rules() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "change@example.com", "password-1", None)
        .await;
    let session = app.login("change@example.com", "password-1").await;
    let other = app.login("change@example.com", "password-1").await;

    let wrong = app
        .post(
            "/api/auth/password/change",
            &session,
            json!({ "currentPassword": "nope", "newPassword": "password-2" }),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong.code(), "INVALID_CURRENT_PASSWORD");
    let short = app
        .post(
            "/api/auth/password/change",
            &session,
            json!({ "currentPassword": "password-1", "newPassword": "x" }),
        )
        .await;
    assert_eq!(short.body["errors"][0]["field"], "newPassword");
    let token = app.create_token(&session, "API").await;
    let with_token = app
        .post(
            "/api/auth/password/change",
            &token,
            json!({ "currentPassword": "password-1", "newPassword": "password-2" }),
        )
        .await;
    assert_eq!(with_token.status, StatusCode::FORBIDDEN);

    let ok = app
        .post(
            "/api/auth/password/change",
            &session,
            json!({ "currentPassword": "password-1", "newPassword": "password-2" }),
        )
        .await;
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/api/auth/me", &session).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get("/api/auth/me", &other).await.code(),
        "SESSION_EXPIRED"
    );
    app.login("change@example.com", "password-2").await;
}

#[tokio::test]
async fn invitations_round_trip() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Editors", "apiAccess": true } }),
        )
        .await;
    let role = role.data()["id"].as_str().unwrap().to_owned();
    let invited = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": "guest@example.com", "name": "Guest", "roleIds": [role] } }),
        )
        .await;
    assert_eq!(invited.status, StatusCode::CREATED);
    assert_eq!(invited.data()["email"], "guest@example.com");
    assert!(invited.data()["expiresAt"].is_string());
    let id = invited.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get("/admin/api/invitations", &admin).await.data()[0]["id"],
        id.as_str()
    );

    let token = app
        .emailed_token("guest@example.com", "accept-invitation")
        .await;
    let accepted = public(
        &app,
        "/api/auth/invitations/accept",
        json!({ "token": token, "password": "password-1" }),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::NO_CONTENT);
    assert!(accepted.body.is_null(), "accepting signs nobody in");
    let session = app.login("guest@example.com", "password-1").await;
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.data()["emailVerified"], true);
    assert_eq!(me.data()["name"], "Guest");
    assert_eq!(me.data()["roles"][0]["name"], "Editors");
    assert_eq!(
        public(
            &app,
            "/api/auth/invitations/accept",
            json!({ "token": token, "password": "password-1" })
        )
        .await
        .code(),
        "INVALID_TOKEN"
    );
    assert!(
        app.get("/admin/api/invitations", &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );

    // An email that has an account cannot be invited; bad input is refused.
    let taken = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": ADMIN_EMAIL, "roleIds": [] } }),
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    let unknown_role = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": "x@example.com", "roleIds": [uuid::Uuid::now_v7()] } }),
        )
        .await;
    assert_eq!(unknown_role.body["errors"][0]["field"], "roleIds");
    let bad_email = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": "x", "roleIds": [] } }),
        )
        .await;
    assert_eq!(bad_email.body["errors"][0]["field"], "email");
}

#[tokio::test]
async fn a_withdrawn_invitation_link_stops_working() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let invited = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": "gone@example.com", "roleIds": [USERS_ROLE] } }),
        )
        .await;
    let id = invited.data()["id"].as_str().unwrap().to_owned();
    let token = app
        .emailed_token("gone@example.com", "accept-invitation")
        .await;
    assert_eq!(
        app.delete(&format!("/admin/api/invitations/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&format!("/admin/api/invitations/{id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let refused = public(
        &app,
        "/api/auth/invitations/accept",
        json!({ "token": token, "password": "password-1" }),
    )
    .await;
    assert_eq!(refused.code(), "INVALID_TOKEN");
}

#[tokio::test]
async fn resend_verification_always_answers_204() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.email_verification_required": true }),
    )
    .await;
    let created = app
        .post(
            "/admin/api/users",
            &admin,
            json!({ "data": { "email": "again@example.com", "password": "password-1" } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    for email in ["again@example.com", "nobody@example.com", "bad"] {
        let answer = public(&app, "/api/auth/email/resend", json!({ "email": email })).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT);
    }
    let token = app.emailed_token("again@example.com", "verify-email").await;
    assert_eq!(
        public(&app, "/api/auth/email/verify", json!({ "token": token }))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    app.login("again@example.com", "password-1").await;
    // With a session, the link goes to the signed-in user.
    let verified = app.admin_session().await;
    assert_eq!(
        app.post("/api/auth/email/resend", &verified, json!({}))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn emails_are_written_to_the_outbox_and_links_follow_the_setting() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.email_links_base_url": "https://app.example.com/auth" }),
    )
    .await;
    app.create_user(&admin, "links@example.com", "password-1", None)
        .await;
    public(
        &app,
        "/api/auth/password/forgot",
        json!({ "email": "links@example.com" }),
    )
    .await;
    let email = app
        .smtp
        .wait_for(
            "links@example.com",
            "reset-password",
            Duration::from_secs(20),
        )
        .await;
    assert!(
        email
            .link("reset-password")
            .unwrap()
            .starts_with("https://app.example.com/auth/reset-password?token=")
    );
    assert!(email.text.contains("text/html") && email.text.contains("text/plain"));
    let audit = app
        .get(
            "/admin/api/audit?action=auth.password_reset_requested",
            &admin,
        )
        .await;
    assert_eq!(audit.data().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_account_without_a_password_cannot_change_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let id = app
        .create_user(&admin, "oauth@example.com", "password-1", None)
        .await;
    let session = app.login("oauth@example.com", "password-1").await;
    // As for an account that signed up through a provider and never set a password.
    app.db
        .sql(&format!(
            "UPDATE svc.users SET password_hash = NULL WHERE id = '{id}'"
        ))
        .await;
    let answer = app
        .post(
            "/api/auth/password/change",
            &session,
            json!({ "currentPassword": "password-1", "newPassword": "password-2" }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.code(), "PERMISSION_DENIED");
}

#[tokio::test]
async fn without_smtp_emails_are_logged_and_kept() {
    let app = testkit::spawn_app_with(|config| config.smtp_url = None).await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "nosmtp@example.com", "password-1", None)
        .await;
    public(
        &app,
        "/api/auth/password/forgot",
        json!({ "email": "nosmtp@example.com" }),
    )
    .await;
    let query = "SELECT count(*)::text FROM svc.email_outbox WHERE to_address = 'nosmtp@example.com' \
                 AND kind = 'reset' AND logged_at IS NOT NULL AND sent_at IS NULL AND link LIKE 'http://tessera.test/admin/auth/reset-password?token=%'";
    let mut logged = None;
    for _ in 0..50 {
        logged = app.db.sql(query).await;
        if logged.as_deref() == Some("1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(logged.as_deref(), Some("1"));
    assert!(app.smtp.emails().is_empty());
}

#[tokio::test]
async fn email_templates_are_rows_edited_through_the_data_api_and_checked() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let templates = app
        .get("/api/data/svc/email_templates?sort=kind", &admin)
        .await;
    assert_eq!(templates.status, StatusCode::OK, "{templates:?}");
    let kinds: Vec<&str> = templates
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["code", "invite", "reset", "verify"]);
    assert!(
        templates.data()[2]["body_html"]
            .as_str()
            .unwrap()
            .contains("{{link}}")
    );

    let path = "/api/data/svc/email_templates/reset";
    for (body, field) in [
        (json!({ "body_text": "no link here" }), "body_text"),
        (
            json!({ "body_html": "<a href=\"{{link}}\">{{ linky }}</a>" }),
            "body_html",
        ),
        (json!({ "subject": "two\nlines" }), "subject"),
        (json!({ "body_text": "{{link}} but {{code}}" }), "body_text"),
    ] {
        let refused = app.patch(path, &admin, json!({ "data": body })).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{refused:?}");
        assert_eq!(refused.code(), "INVALID_PAYLOAD");
        assert_eq!(refused.body["errors"][0]["field"], field);
    }
    let changed = app
        .patch(
            path,
            &admin,
            json!({ "data": {
                "subject": "Password help for{{name}}",
                "body_text": "Hi{{name}}! Your link: {{link}} (edited)",
            } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{changed:?}");
    // The sign-in code's email must carry the code as well as the link.
    let code_path = "/api/data/svc/email_templates/code";
    let no_code = app
        .patch(
            code_path,
            &admin,
            json!({ "data": { "body_text": "{{link}}" } }),
        )
        .await;
    assert_eq!(no_code.status, StatusCode::BAD_REQUEST, "{no_code:?}");
    assert_eq!(no_code.body["errors"][0]["field"], "body_text");
    let with_code = app
        .patch(
            code_path,
            &admin,
            json!({ "data": { "body_text": "{{code}} or {{link}}" } }),
        )
        .await;
    assert_eq!(with_code.status, StatusCode::OK, "{with_code:?}");
    let removed = app.delete(path, &admin).await;
    assert_eq!(removed.status, StatusCode::METHOD_NOT_ALLOWED);

    app.create_user(&admin, "edited@example.com", "password-1", None)
        .await;
    public(
        &app,
        "/api/auth/password/forgot",
        json!({ "email": "edited@example.com" }),
    )
    .await;
    let email = app
        .smtp
        .wait_for("edited@example.com", "(edited)", Duration::from_secs(10))
        .await;
    assert!(
        email.text.contains("Password help for Test User"),
        "{email:?}"
    );
    assert!(email.token("reset-password").is_some());
}
