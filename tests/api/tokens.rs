//! Personal access tokens: planes, session-only routes, revocation.

use reqwest::{Method, StatusCode};
use serde_json::json;
use testkit::spawn_app;

use crate::ADMINS_ROLE;

#[tokio::test]
async fn tokens_are_shown_once_and_listed_without_secrets() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let created = app
        .post(
            "/api/auth/tokens",
            &session,
            json!({ "name": "ci", "lifetimeDays": 7, "plane": "API" }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let token = created.data()["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("svc_") && token.len() >= 4 + 43);
    assert!(token.starts_with(created.data()["prefix"].as_str().unwrap()));
    for key in ["id", "name", "plane", "prefix", "expiresAt", "createdAt"] {
        assert!(!created.data()[key].is_null(), "{key}");
    }
    let expires =
        chrono::DateTime::parse_from_rfc3339(created.data()["expiresAt"].as_str().unwrap())
            .unwrap();
    let days = (expires.to_utc() - chrono::Utc::now()).num_hours();
    assert!((7 * 24 - 1..=7 * 24).contains(&days));

    let list = app.get("/api/auth/tokens", &session).await;
    assert_eq!(list.status, StatusCode::OK);
    let text = list.body.to_string();
    assert!(!text.contains(&token[4..]), "secret leaked in list");
    assert_eq!(list.data().as_array().unwrap().len(), 1);
    let admin_list = app.get("/admin/api/tokens", &session).await;
    assert!(!admin_list.body.to_string().contains(&token[4..]));
}

#[tokio::test]
async fn token_input_is_validated() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    for (body, field) in [
        (
            json!({ "name": "x", "lifetimeDays": 0, "plane": "API" }),
            "lifetimeDays",
        ),
        (
            json!({ "name": "x", "lifetimeDays": 3651, "plane": "API" }),
            "lifetimeDays",
        ),
        (
            json!({ "name": "x", "lifetimeDays": "10", "plane": "API" }),
            "lifetimeDays",
        ),
        (
            json!({ "name": "x", "lifetimeDays": 10, "plane": "DATA" }),
            "plane",
        ),
        (
            json!({ "name": "", "lifetimeDays": 10, "plane": "API" }),
            "name",
        ),
        (
            json!({ "name": "x".repeat(101), "lifetimeDays": 10, "plane": "API" }),
            "name",
        ),
        (json!({ "lifetimeDays": 10, "plane": "API" }), "name"),
    ] {
        let answer = app.post("/api/auth/tokens", &session, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer.code(), "INVALID_PAYLOAD");
        assert_eq!(answer.body["errors"][0]["field"], field, "{body}");
    }
    let max = app
        .post(
            "/api/auth/tokens",
            &session,
            json!({ "name": "x", "lifetimeDays": 3650, "plane": "ADMIN" }),
        )
        .await;
    assert_eq!(max.status, StatusCode::CREATED);
}

#[tokio::test]
async fn planes_and_session_only_routes() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let api = app.create_token(&session, "API").await;
    let admin = app.create_token(&session, "ADMIN").await;

    // Session-only routes refuse every token.
    for token in [&api, &admin] {
        for (method, path) in [
            (Method::GET, "/api/auth/me"),
            (Method::GET, "/api/auth/sessions"),
            (Method::GET, "/api/auth/tokens"),
            (Method::POST, "/api/auth/logout"),
        ] {
            let answer = app.call(method, path, Some(token), None).await;
            assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
            assert_eq!(answer.code(), "PERMISSION_DENIED");
        }
    }
    // An API token on the Admin API: wrong plane.
    let wrong = app.get("/admin/api/users", &api).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert_eq!(wrong.code(), "PERMISSION_DENIED");
    // An ADMIN token does what its administrator can.
    assert_eq!(
        app.get("/admin/api/users", &admin).await.status,
        StatusCode::OK
    );
    // A session works on the Admin API for administrators.
    assert_eq!(
        app.get("/admin/api/users", &session).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn only_administrators_get_admin_tokens() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "user@example.com", "password-1", None)
        .await;
    let user = app.login("user@example.com", "password-1").await;
    let refused = app
        .post(
            "/api/auth/tokens",
            &user,
            json!({ "name": "x", "lifetimeDays": 1, "plane": "ADMIN" }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "PERMISSION_DENIED");
    let api = app
        .post(
            "/api/auth/tokens",
            &user,
            json!({ "name": "x", "lifetimeDays": 1, "plane": "API" }),
        )
        .await;
    assert_eq!(api.status, StatusCode::CREATED);
    // A non-administrator's session is refused by the Admin API.
    let admin_api = app.get("/admin/api/users", &user).await;
    assert_eq!(admin_api.status, StatusCode::FORBIDDEN);
    assert_eq!(admin_api.code(), "PERMISSION_DENIED");
    // An administrator cannot issue an ADMIN token to a non-administrator either.
    let user_id = app.get("/api/auth/me", &user).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let for_user = app.post("/admin/api/tokens", &admin, json!({ "data": { "userId": user_id, "name": "x", "lifetimeDays": 1, "plane": "ADMIN" } })).await;
    assert_eq!(for_user.status, StatusCode::BAD_REQUEST);
    assert_eq!(for_user.body["errors"][0]["field"], "plane");
}

#[tokio::test]
async fn revocation_applies_on_the_next_request() {
    let app = spawn_app().await;
    let session = app.admin_session().await;
    let created = app
        .post(
            "/api/auth/tokens",
            &session,
            json!({ "name": "x", "lifetimeDays": 1, "plane": "ADMIN" }),
        )
        .await;
    let token = created.data()["token"].as_str().unwrap().to_owned();
    let id = created.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get("/admin/api/roles", &token).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.delete(&format!("/api/auth/tokens/{id}"), &session)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let after = app.get("/admin/api/roles", &token).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
    assert_eq!(after.code(), "AUTHENTICATION_REQUIRED");
    assert_eq!(
        app.delete(&format!("/api/auth/tokens/{id}"), &session)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert!(
        app.get("/api/auth/tokens", &session)
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn admin_token_lifecycle_and_role_removal() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let second = app
        .create_user(
            &admin,
            "second@example.com",
            "password-1",
            Some(vec![ADMINS_ROLE.into()]),
        )
        .await;
    let created = app.post("/admin/api/tokens", &admin, json!({ "data": { "userId": second, "name": "ops", "lifetimeDays": 30, "plane": "ADMIN" } })).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let token = created.data()["token"].as_str().unwrap().to_owned();
    let listed = app
        .get(&format!("/admin/api/tokens?userId={second}"), &admin)
        .await;
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    assert_eq!(
        app.get("/admin/api/users", &token).await.status,
        StatusCode::OK
    );

    // Removed from Administrators: the token is refused at once.
    let removed = app
        .delete(
            &format!("/admin/api/roles/{ADMINS_ROLE}/members/{second}"),
            &admin,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let denied = app.get("/admin/api/users", &token).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(denied.code(), "PERMISSION_DENIED");

    // Deactivated: 401.
    app.call(
        Method::PUT,
        &format!("/admin/api/roles/{ADMINS_ROLE}/members/{second}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        app.get("/admin/api/users", &token).await.status,
        StatusCode::OK
    );
    app.patch(
        &format!("/admin/api/users/{second}"),
        &admin,
        json!({ "data": { "active": false } }),
    )
    .await;
    assert_eq!(
        app.get("/admin/api/users", &token).await.status,
        StatusCode::UNAUTHORIZED
    );

    // Revoked by an administrator.
    app.patch(
        &format!("/admin/api/users/{second}"),
        &admin,
        json!({ "data": { "active": true } }),
    )
    .await;
    let id = created.data()["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/admin/api/tokens/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/admin/api/users", &token).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.delete(
            &format!("/admin/api/tokens/{}", uuid::Uuid::now_v7()),
            &admin
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn unknown_or_malformed_tokens_are_refused() {
    let app = spawn_app().await;
    for bad in ["svc_doesnotexist", "svc_", "Basic abc"] {
        let answer = app.get("/admin/api/users", bad).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{bad}");
        assert_eq!(answer.code(), "AUTHENTICATION_REQUIRED");
    }
    let basic = app
        .client
        .get(format!("{}/admin/api/users", app.address))
        .basic_auth("a", Some("b"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
}
