//! Runtime settings.

use reqwest::StatusCode;
use serde_json::json;
use testkit::spawn_app;

#[tokio::test]
async fn defaults_are_listed() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let settings = app.get("/admin/api/settings", &admin).await;
    assert_eq!(settings.status, StatusCode::OK);
    let s = settings.data();
    assert_eq!(s["auth.session_ttl_hours"], 720);
    assert_eq!(s["auth.registration_enabled"], false);
    assert_eq!(s["auth.registration_role_id"], crate::USERS_ROLE);
    assert_eq!(s["auth.password_min_length"], 8);
    assert_eq!(s["auth.lockout_threshold"], 10);
    assert_eq!(s["auth.lockout_minutes"], 15);
    assert!(s["auth.email_links_base_url"].is_null());
    assert!(s["system.timezone"].is_null());
    assert_eq!(s["security.cors_origins"], json!([]));
    assert_eq!(s["workflows.max_sync_wait_ms"], 30000);
    assert_eq!(s["workflows.public_rate_limit_per_minute"], 60);
    assert_eq!(s["workflows.http_allow_private"], false);
    assert_eq!(s["workflows.run_retention_days"], 30);
    assert_eq!(s["mcp.enabled"], false);
    assert_eq!(s["sql_console.allow_api_tokens"], false);
    assert_eq!(s["sql_console.timeout_ms"], 30000);
    assert_eq!(s["files.max_bytes"], 26214400);
    assert_eq!(s["auth.oauth"]["github"]["enabled"], false);
}

#[tokio::test]
async fn changes_are_validated_and_answer_the_full_object() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let ok = app
        .patch("/admin/api/settings", &admin, json!({ "data": { "system.timezone": "America/Los_Angeles", "security.cors_origins": ["https://app.example.com"], "auth.password_min_length": 12 } }))
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.data()["system.timezone"], "America/Los_Angeles");
    assert_eq!(ok.data()["auth.lockout_threshold"], 10);
    assert_eq!(
        app.get("/admin/api/settings", &admin).await.data()["auth.password_min_length"],
        12
    );
    // The new minimum applies to new passwords.
    let short = app
        .post(
            "/admin/api/users",
            &admin,
            json!({ "data": { "email": "s@example.com", "password": "elevenchars" } }),
        )
        .await;
    assert_eq!(short.body["errors"][0]["field"], "password");

    for (body, field) in [
        (json!({ "auth.unknown": 1 }), "auth.unknown"),
        (
            json!({ "auth.session_ttl_hours": "720" }),
            "auth.session_ttl_hours",
        ),
        (
            json!({ "auth.session_ttl_hours": 0 }),
            "auth.session_ttl_hours",
        ),
        (
            json!({ "auth.password_min_length": 129 }),
            "auth.password_min_length",
        ),
        (json!({ "system.timezone": "Mars/Base" }), "system.timezone"),
        (
            json!({ "security.cors_origins": "https://a.example" }),
            "security.cors_origins",
        ),
        (
            json!({ "auth.registration_role_id": "01a20181-b6ac-7251-8482-683be730d9f5" }),
            "auth.registration_role_id",
        ),
        (
            json!({ "workflows.public_rate_limit_per_minute": 0 }),
            "workflows.public_rate_limit_per_minute",
        ),
    ] {
        let answer = app
            .patch(
                "/admin/api/settings",
                &admin,
                json!({ "data": body.clone() }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer.code(), "INVALID_PAYLOAD");
        assert_eq!(answer.body["errors"][0]["field"], field);
    }
    // A refused patch changes nothing, even its valid keys.
    let mixed = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.lockout_minutes": 99, "nope": true } }),
        )
        .await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.get("/admin/api/settings", &admin).await.data()["auth.lockout_minutes"],
        15
    );
}

#[tokio::test]
async fn session_only_settings_refuse_tokens() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let token = app.create_token(&session, "ADMIN").await;
    for key in ["mcp.enabled", "sql_console.allow_api_tokens"] {
        let refused = app
            .patch(
                "/admin/api/settings",
                &token,
                json!({ "data": { key: true } }),
            )
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{key}");
        assert_eq!(refused.code(), "PERMISSION_DENIED");
        let allowed = app
            .patch(
                "/admin/api/settings",
                &session,
                json!({ "data": { key: true } }),
            )
            .await;
        assert_eq!(allowed.status, StatusCode::OK);
        assert_eq!(allowed.data()[key], true);
    }
    let other = app
        .patch(
            "/admin/api/settings",
            &token,
            json!({ "data": { "auth.lockout_minutes": 5 } }),
        )
        .await;
    assert_eq!(other.status, StatusCode::OK);
}

#[tokio::test]
async fn oauth_secrets_are_write_only() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let set = app
        .patch("/admin/api/settings", &admin, json!({ "data": { "auth.oauth": { "github": { "enabled": true, "clientId": "abc", "clientSecret": "s3cret" } } } }))
        .await;
    assert_eq!(set.status, StatusCode::OK);
    assert_eq!(set.data()["auth.oauth"]["github"]["clientId"], "abc");
    assert!(set.data()["auth.oauth"]["github"]["clientSecret"].is_null());
    let read = app.get("/admin/api/settings", &admin).await;
    assert!(!read.body.to_string().contains("s3cret"));
}

#[tokio::test]
async fn oauth_accepts_every_field_of_the_contract() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let providers = json!({
        "google": { "enabled": true, "clientId": "g", "clientSecret": "g-secret",
            "authorizeUrl": "https://accounts.example/auth", "tokenUrl": "https://accounts.example/token",
            "userinfoUrl": "https://accounts.example/userinfo" },
        "github": { "enabled": true, "clientId": "h", "clientSecret": "h-secret",
            "authorizeUrl": "https://ghe.example/login/oauth/authorize",
            "tokenUrl": "https://ghe.example/login/oauth/access_token",
            "userinfoUrl": "https://ghe.example/api/v3/user", "apiUrl": "https://ghe.example/api/v3" },
        "oidc": { "enabled": true, "clientId": "o", "clientSecret": "o-secret", "issuer": "https://id.example" }
    });
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": providers } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let oauth = &set.data()["auth.oauth"];
    assert_eq!(oauth["github"]["apiUrl"], "https://ghe.example/api/v3");
    assert_eq!(oauth["oidc"]["issuer"], "https://id.example");
    assert_eq!(
        oauth["google"]["userinfoUrl"],
        "https://accounts.example/userinfo"
    );

    // A field the provider does not have is named in the error.
    let wrong = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": { "google": { "apiUrl": "https://x.example" } } } }),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong.body["errors"][0]["field"], "auth.oauth.google.apiUrl");

    // A provider given again replaces the stored one, keeping its secret.
    let again = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": { "github": { "enabled": false } } } }),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.data()["auth.oauth"]["github"]["apiUrl"].is_null());
    assert_eq!(
        again.data()["auth.oauth"]["oidc"]["issuer"],
        "https://id.example"
    );
    let stored = app
        .db
        .sql("SELECT value #>> '{github,clientSecret}' FROM svc.settings WHERE key = 'auth.oauth'")
        .await;
    assert_eq!(stored.as_deref(), Some("h-secret"));
}

#[tokio::test]
async fn a_change_announced_by_another_instance_applies_at_once() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // Warm the cache, then change the setting the way another instance does.
    assert_eq!(
        app.get("/admin/api/settings", &admin).await.data()["auth.lockout_minutes"],
        15
    );
    app.db
        .sql("WITH changed AS (INSERT INTO svc.settings (key, value) VALUES ('auth.lockout_minutes', '42') RETURNING key) SELECT pg_notify('tessera_settings', key) FROM changed")
        .await;
    let mut seen = None;
    for _ in 0..50 {
        seen = Some(
            app.get("/admin/api/settings", &admin).await.data()["auth.lockout_minutes"].clone(),
        );
        if seen == Some(json!(42)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(seen, Some(json!(42)));
}
