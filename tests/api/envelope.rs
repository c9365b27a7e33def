//! Every answer is in the envelope, including actix's own failures.

use reqwest::{Method, StatusCode};
use serde_json::json;
use testkit::spawn_app;

#[tokio::test]
async fn health_and_readiness_need_no_credential() {
    let app = spawn_app().await;
    let health = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body["status"], "ok");
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK);
}

#[tokio::test]
async fn readiness_fails_when_the_database_is_gone() {
    let app = spawn_app().await;
    app.db.destroy().await;
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    let me = app
        .call(Method::GET, "/api/auth/me", Some("whatever"), None)
        .await;
    assert_eq!(me.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(me.code(), "UNAVAILABLE");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_404_in_the_envelope() {
    let app = spawn_app().await;
    for (method, path) in [
        (Method::GET, "/nope"),
        (Method::PUT, "/api/auth/login"),
        (Method::GET, "/admin/api/nothing-here"),
    ] {
        let answer = app.call(method, path, None, None).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.code(), "NOT_FOUND");
        assert!(
            answer.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
    }
}

#[tokio::test]
async fn malformed_path_ids_are_unknown_ids() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    for path in [
        "/admin/api/users/not-a-uuid",
        "/admin/api/users/01a20181-b6ac-7251-8482-683be730d9f5",
        "/admin/api/roles/123",
    ] {
        let answer = app.get(path, &admin).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.code(), "NOT_FOUND");
    }
}

#[tokio::test]
async fn bad_bodies_get_precise_errors() {
    let app = spawn_app().await;
    let url = format!("{}/api/auth/login", app.address);

    let bad_json = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    let bad_json = testkit::TestApp::answer(bad_json).await;
    assert_eq!(bad_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_json.code(), "INVALID_PAYLOAD");

    let text = app
        .client
        .post(&url)
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    let text = testkit::TestApp::answer(text).await;
    assert_eq!(text.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(text.code(), "UNSUPPORTED_MEDIA_TYPE");

    let huge = "x".repeat(1_100_000);
    let big = app
        .client
        .post(&url)
        .json(&json!({ "email": huge, "password": "p" }))
        .send()
        .await
        .unwrap();
    let big = testkit::TestApp::answer(big).await;
    assert_eq!(big.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(big.code(), "PAYLOAD_TOO_LARGE");

    let missing = app
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({ "email": "a@b.c" })),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.body["errors"][0]["field"], "password");

    let wrong_type = app
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({ "email": 5, "password": "x" })),
        )
        .await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong_type.body["errors"][0]["field"], "email");

    let admin = app.admin_session().await;
    let no_data = app
        .post("/admin/api/roles", &admin, json!({ "name": "x" }))
        .await;
    assert_eq!(no_data.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_data.body["errors"][0]["field"], "data");

    let bad_limit = app.get("/admin/api/users?limit=0", &admin).await;
    assert_eq!(bad_limit.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_limit.code(), "INVALID_QUERY");
    let bad_offset = app.get("/admin/api/users?offset=-1", &admin).await;
    assert_eq!(bad_offset.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_offset.code(), "INVALID_QUERY");
}

#[tokio::test]
async fn every_answer_carries_a_request_id() {
    let app = spawn_app().await;
    let answer = app.call(Method::GET, "/healthz", None, None).await;
    assert!(answer.headers.contains_key("x-request-id"));
}
