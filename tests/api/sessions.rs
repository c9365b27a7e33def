//! Sessions: me, logout, TTL, listing and ending, password changes.

use reqwest::{Method, StatusCode};
use serde_json::json;
use testkit::{ADMIN_EMAIL, ADMIN_PASSWORD, spawn_app, spawn_app_with_clock};

#[tokio::test]
async fn me_needs_a_credential() {
    let app = spawn_app().await;
    let none = app.call(Method::GET, "/api/auth/me", None, None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    assert_eq!(none.code(), "AUTHENTICATION_REQUIRED");
    let garbage = app.get("/api/auth/me", "not-a-real-session").await;
    assert_eq!(garbage.status, StatusCode::UNAUTHORIZED);
    assert_eq!(garbage.code(), "AUTHENTICATION_REQUIRED");
    let session = app.admin_session().await;
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.status, StatusCode::OK);
    let user = me.data();
    assert_eq!(user["email"], ADMIN_EMAIL);
    assert_eq!(user["emailVerified"], true);
    assert_eq!(user["active"], true);
    assert_eq!(user["roles"][0]["name"], "Administrators");
    assert!(user["createdAt"].is_string());
    assert!(user.get("passwordHash").is_none() && user.get("password_hash").is_none());
}

#[tokio::test]
async fn logout_ends_the_session() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let out = app
        .call(Method::POST, "/api/auth/logout", Some(&session), None)
        .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
    assert!(out.body.is_null());
    let after = app.get("/api/auth/me", &session).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
    assert_eq!(after.code(), "SESSION_EXPIRED");
}

#[tokio::test]
async fn sessions_expire_after_the_ttl_and_use_does_not_extend_them() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.session_ttl_hours": 0.5 } }),
    )
    .await;
    let session = app.admin_session().await;
    app.advance(chrono::Duration::minutes(20));
    assert_eq!(
        app.get("/api/auth/me", &session).await.status,
        StatusCode::OK
    );
    app.advance(chrono::Duration::minutes(11));
    let expired = app.get("/api/auth/me", &session).await;
    assert_eq!(expired.status, StatusCode::UNAUTHORIZED);
    assert_eq!(expired.code(), "SESSION_EXPIRED");
}

#[tokio::test]
async fn a_tiny_fractional_ttl_expires_to_the_second() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    // 0.0003 h is 1.08 seconds.
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.session_ttl_hours": 0.0003 } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK);
    let session = app.admin_session().await;
    app.advance(chrono::Duration::milliseconds(1000));
    assert_eq!(
        app.get("/api/auth/me", &session).await.status,
        StatusCode::OK
    );
    app.advance(chrono::Duration::milliseconds(100));
    assert_eq!(
        app.get("/api/auth/me", &session).await.code(),
        "SESSION_EXPIRED"
    );
}

#[tokio::test]
async fn sessions_are_listed_and_ended_one_by_one() {
    let app = spawn_app().await;
    let first = app.admin_session().await;
    let second = app.admin_session().await;
    let list = app.get("/api/auth/sessions", &first).await;
    assert_eq!(list.status, StatusCode::OK);
    let sessions = list.data().as_array().unwrap().clone();
    assert!(sessions.len() >= 2);
    let current: Vec<_> = sessions.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1);
    let other = sessions.iter().find(|s| s["current"] == false).unwrap();
    assert!(other["expiresAt"].is_string() && other["createdAt"].is_string());
    let id = other["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/api/auth/sessions/{id}"), &first)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/api/auth/me", &second).await.code(),
        "SESSION_EXPIRED"
    );
    assert_eq!(app.get("/api/auth/me", &first).await.status, StatusCode::OK);
    // Someone else's or an unknown session is not found.
    let missing = app
        .delete(&format!("/api/auth/sessions/{id}"), &first)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_user_cannot_end_another_users_session() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "u1@example.com", "password-1", None)
        .await;
    let user = app.login("u1@example.com", "password-1").await;
    let admin_sessions = app.get("/api/auth/sessions", &admin).await;
    let admin_session_id = admin_sessions.data()[0]["id"].as_str().unwrap().to_owned();
    let attempt = app
        .delete(&format!("/api/auth/sessions/{admin_session_id}"), &user)
        .await;
    assert_eq!(attempt.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/auth/me", &admin).await.status, StatusCode::OK);
}

#[tokio::test]
async fn patch_me_changes_name_and_time_zone() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let changed = app
        .patch(
            "/api/auth/me",
            &session,
            json!({ "name": "Ada", "timezone": "Pacific/Auckland" }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(changed.data()["name"], "Ada");
    assert_eq!(changed.data()["timezone"], "Pacific/Auckland");
    let bad = app
        .patch(
            "/api/auth/me",
            &session,
            json!({ "timezone": "Mars/Olympus" }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.code(), "INVALID_PAYLOAD");
    assert_eq!(bad.body["errors"][0]["field"], "timezone");
    let long = app
        .patch("/api/auth/me", &session, json!({ "name": "x".repeat(201) }))
        .await;
    assert_eq!(long.status, StatusCode::BAD_REQUEST);
    assert_eq!(long.body["errors"][0]["field"], "name");
    let cleared = app
        .patch("/api/auth/me", &session, json!({ "timezone": null }))
        .await;
    assert!(cleared.data()["timezone"].is_null());
    assert_eq!(cleared.data()["name"], "Ada");
}

#[tokio::test]
async fn a_new_password_ends_every_other_session() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let id = app
        .create_user(&admin, "pw@example.com", "password-1", None)
        .await;
    let first = app.login("pw@example.com", "password-1").await;
    let second = app.login("pw@example.com", "password-1").await;
    let changed = app
        .patch(
            &format!("/admin/api/users/{id}"),
            &admin,
            json!({ "data": { "password": "password-2" } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(
        app.get("/api/auth/me", &first).await.code(),
        "SESSION_EXPIRED"
    );
    assert_eq!(
        app.get("/api/auth/me", &second).await.code(),
        "SESSION_EXPIRED"
    );
    assert_eq!(
        app.login_answer("pw@example.com", "password-1")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    app.login("pw@example.com", "password-2").await;

    // An administrator changing their own password keeps the session they use.
    let me = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = app.admin_session().await;
    let own = app
        .patch(
            &format!("/admin/api/users/{me}"),
            &admin,
            json!({ "data": { "password": "new-admin-password" } }),
        )
        .await;
    assert_eq!(own.status, StatusCode::OK);
    assert_eq!(app.get("/api/auth/me", &admin).await.status, StatusCode::OK);
    assert_eq!(
        app.get("/api/auth/me", &other).await.code(),
        "SESSION_EXPIRED"
    );
    assert_eq!(
        app.login_answer(ADMIN_EMAIL, ADMIN_PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn deactivation_and_role_removal_apply_on_the_next_request() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let id = app
        .create_user(&admin, "next@example.com", "password-1", None)
        .await;
    let session = app.login("next@example.com", "password-1").await;
    assert_eq!(
        app.get("/api/auth/me", &session).await.status,
        StatusCode::OK
    );

    // No role with API access left: 403.
    let roles = app
        .patch(
            &format!("/admin/api/users/{id}"),
            &admin,
            json!({ "data": { "roleIds": [] } }),
        )
        .await;
    assert_eq!(roles.status, StatusCode::OK);
    let denied = app.get("/api/auth/me", &session).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(denied.code(), "PERMISSION_DENIED");

    // Deactivated: 401.
    let session2 = {
        app.patch(
            &format!("/admin/api/users/{id}"),
            &admin,
            json!({ "data": { "roleIds": [crate::USERS_ROLE] } }),
        )
        .await;
        app.login("next@example.com", "password-1").await
    };
    app.patch(
        &format!("/admin/api/users/{id}"),
        &admin,
        json!({ "data": { "active": false } }),
    )
    .await;
    let refused = app.get("/api/auth/me", &session2).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}
