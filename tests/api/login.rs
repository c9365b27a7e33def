//! Sign-in: the uniform 401, EMAIL_NOT_VERIFIED, lockout, API access.

use reqwest::StatusCode;
use serde_json::json;
use testkit::{ADMIN_EMAIL, ADMIN_PASSWORD, spawn_app, spawn_app_with_clock};

use crate::USERS_ROLE;

#[tokio::test]
async fn login_returns_a_session_token_and_the_user() {
    let app = spawn_app().await;
    let answer = app.login_answer(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(answer.status, StatusCode::OK);
    let data = answer.data();
    assert!(data["token"].as_str().unwrap().len() >= 43);
    assert_eq!(data["user"]["email"], ADMIN_EMAIL);
    assert!(data["user"]["id"].is_string());
    assert_eq!(data["user"]["name"], "Admin");
    // The email is matched case-insensitively.
    let upper = app
        .login_answer(&ADMIN_EMAIL.to_uppercase(), ADMIN_PASSWORD)
        .await;
    assert_eq!(upper.status, StatusCode::OK);
}

#[tokio::test]
async fn every_failed_sign_in_answers_the_same() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // A role without API access.
    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Readers", "apiAccess": false } }),
        )
        .await;
    let no_api_role = role.data()["id"].as_str().unwrap().to_owned();
    app.create_user(&admin, "plain@example.com", "password-1", None)
        .await;
    app.create_user(
        &admin,
        "noapi@example.com",
        "password-1",
        Some(vec![no_api_role]),
    )
    .await;
    let inactive = app
        .create_user(&admin, "inactive@example.com", "password-1", None)
        .await;
    app.patch(
        &format!("/admin/api/users/{inactive}"),
        &admin,
        json!({ "data": { "active": false } }),
    )
    .await;
    let nopass = app
        .post(
            "/admin/api/users",
            &admin,
            json!({ "data": { "email": "nopass@example.com" } }),
        )
        .await;
    assert_eq!(nopass.status, StatusCode::CREATED);

    let attempts = [
        ("unknown@example.com", "password-1"),
        ("plain@example.com", "wrong-password"),
        ("noapi@example.com", "password-1"),
        ("inactive@example.com", "password-1"),
        ("nopass@example.com", "password-1"),
        ("nopass@example.com", ""),
        ("", ""),
    ];
    let mut bodies = Vec::new();
    for (email, password) in attempts {
        let answer = app.login_answer(email, password).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{email}");
        bodies.push(answer.body);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "bodies differ: {bodies:?}"
    );
    assert_eq!(
        bodies[0],
        json!({ "errors": [ { "code": "AUTHENTICATION_REQUIRED", "message": "Invalid email or password" } ] })
    );
}

#[tokio::test]
async fn email_not_verified_is_told_only_after_the_right_password() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app
        .post(
            "/admin/api/users",
            &admin,
            json!({ "data": { "email": "unverified@example.com", "password": "password-1", "roleIds": [USERS_ROLE] } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.email_verification_required": true } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK);

    let wrong = app
        .login_answer("unverified@example.com", "nope-nope")
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let right = app
        .login_answer("unverified@example.com", "password-1")
        .await;
    assert_eq!(right.status, StatusCode::FORBIDDEN);
    assert_eq!(right.code(), "EMAIL_NOT_VERIFIED");
    // The administrator is verified and still signs in.
    app.admin_session().await;
}

#[tokio::test]
async fn lockout_refuses_even_the_right_password_until_it_expires() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.lockout_threshold": 3, "auth.lockout_minutes": 10 } }),
    )
    .await;
    app.create_user(&admin, "lock@example.com", "password-1", None)
        .await;
    // Failures that are not in a row do not lock.
    app.login_answer("lock@example.com", "bad").await;
    app.login_answer("lock@example.com", "bad").await;
    app.login("lock@example.com", "password-1").await;
    for _ in 0..3 {
        assert_eq!(
            app.login_answer("lock@example.com", "bad").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let locked = app.login_answer("lock@example.com", "password-1").await;
    assert_eq!(locked.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        locked.body["errors"][0]["message"],
        "Invalid email or password"
    );
    app.advance(chrono::Duration::minutes(9));
    assert_eq!(
        app.login_answer("lock@example.com", "password-1")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    app.advance(chrono::Duration::minutes(2));
    app.login("lock@example.com", "password-1").await;
}

#[tokio::test]
async fn sign_in_needs_a_role_with_api_access() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let id = app
        .create_user(&admin, "roleless@example.com", "password-1", Some(vec![]))
        .await;
    assert_eq!(
        app.login_answer("roleless@example.com", "password-1")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    let put = app
        .call(
            reqwest::Method::PUT,
            &format!("/admin/api/roles/{USERS_ROLE}/members/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    app.login("roleless@example.com", "password-1").await;
}
