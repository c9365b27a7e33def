//! User administration.

use reqwest::StatusCode;
use serde_json::json;
use testkit::spawn_app;

use crate::{ADMINS_ROLE, USERS_ROLE};

#[tokio::test]
async fn users_are_created_read_listed_changed_and_deleted() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app
        .post("/admin/api/users", &admin, json!({ "data": { "email": "Ann@Example.com", "name": "Ann", "password": "password-1", "timezone": "Europe/Paris" } }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let user = created.data().clone();
    assert_eq!(user["email"], "Ann@Example.com");
    assert_eq!(user["emailVerified"], false);
    assert_eq!(user["timezone"], "Europe/Paris");
    assert_eq!(
        user["roles"],
        json!([{ "id": USERS_ROLE, "name": "Users" }])
    );
    let id = user["id"].as_str().unwrap();

    assert_eq!(
        app.get(&format!("/admin/api/users/{id}"), &admin)
            .await
            .data(),
        &user
    );

    let page = app
        .get("/admin/api/users?search=ann&limit=10", &admin)
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.body["meta"]["total"], 1);
    assert_eq!(page.data()[0]["id"], id);
    let all = app.get("/admin/api/users?limit=1&offset=1", &admin).await;
    assert_eq!(all.body["meta"]["total"], 2);
    assert_eq!(all.data().as_array().unwrap().len(), 1);
    // LIKE wildcards in a search are literal.
    assert_eq!(
        app.get("/admin/api/users?search=%25", &admin).await.body["meta"]["total"],
        0
    );

    let changed = app
        .patch(&format!("/admin/api/users/{id}"), &admin, json!({ "data": { "name": null, "emailVerified": true, "roleIds": [USERS_ROLE, ADMINS_ROLE] } }))
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    assert!(changed.data()["name"].is_null());
    assert_eq!(changed.data()["emailVerified"], true);
    assert_eq!(changed.data()["roles"].as_array().unwrap().len(), 2);

    assert_eq!(
        app.delete(&format!("/admin/api/users/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&format!("/admin/api/users/{id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/admin/api/users/{id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn user_input_is_validated_and_nothing_is_half_written() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "taken@example.com", "password-1", None)
        .await;
    let cases = [
        (
            json!({ "email": "not-an-email" }),
            StatusCode::BAD_REQUEST,
            "email",
        ),
        (
            json!({ "email": format!("{}@example.com", "a".repeat(250)) }),
            StatusCode::BAD_REQUEST,
            "email",
        ),
        (
            json!({ "email": "x@example.com", "password": "short" }),
            StatusCode::BAD_REQUEST,
            "password",
        ),
        (
            json!({ "email": "x@example.com", "name": "n".repeat(201) }),
            StatusCode::BAD_REQUEST,
            "name",
        ),
        (
            json!({ "email": "x@example.com", "timezone": "Nowhere/City" }),
            StatusCode::BAD_REQUEST,
            "timezone",
        ),
        (
            json!({ "email": "x@example.com", "roleIds": ["01a20181-b6ac-7251-8482-683be730d9f5"] }),
            StatusCode::BAD_REQUEST,
            "roleIds",
        ),
        (
            json!({ "email": "x@example.com", "roleIds": ["nope"] }),
            StatusCode::BAD_REQUEST,
            "roleIds[0]",
        ),
        (
            json!({ "email": "TAKEN@example.com" }),
            StatusCode::CONFLICT,
            "email",
        ),
    ];
    for (data, status, field) in cases {
        let answer = app
            .post("/admin/api/users", &admin, json!({ "data": data.clone() }))
            .await;
        assert_eq!(answer.status, status, "{data}");
        assert_eq!(answer.body["errors"][0]["field"], field, "{data}");
    }
    // The refused user with an unknown role left no row behind.
    let page = app
        .get("/admin/api/users?search=x%40example.com", &admin)
        .await;
    assert_eq!(page.body["meta"]["total"], 0);
    // An email change onto a taken one is a conflict too.
    let id = app
        .create_user(&admin, "free@example.com", "password-1", None)
        .await;
    let clash = app
        .patch(
            &format!("/admin/api/users/{id}"),
            &admin,
            json!({ "data": { "email": "taken@EXAMPLE.com" } }),
        )
        .await;
    assert_eq!(clash.status, StatusCode::CONFLICT);
    assert_eq!(clash.code(), "CONFLICT");
    assert_eq!(
        app.patch(
            &format!("/admin/api/users/{}", uuid::Uuid::now_v7()),
            &admin,
            json!({ "data": {} })
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_last_active_administrator_stays() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deactivate = app
        .patch(
            &format!("/admin/api/users/{me}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(deactivate.status, StatusCode::CONFLICT);
    let demote = app
        .patch(
            &format!("/admin/api/users/{me}"),
            &admin,
            json!({ "data": { "roleIds": [USERS_ROLE] } }),
        )
        .await;
    assert_eq!(demote.status, StatusCode::CONFLICT);
    let remove = app
        .delete(
            &format!("/admin/api/roles/{ADMINS_ROLE}/members/{me}"),
            &admin,
        )
        .await;
    assert_eq!(remove.status, StatusCode::CONFLICT);
    assert_eq!(
        app.delete(&format!("/admin/api/users/{me}"), &admin)
            .await
            .status,
        StatusCode::CONFLICT
    );
    // Still an administrator, still signed in.
    assert_eq!(
        app.get("/admin/api/users", &admin).await.status,
        StatusCode::OK
    );
    // With a second administrator the first may go.
    app.create_user(
        &admin,
        "other-admin@example.com",
        "password-1",
        Some(vec![ADMINS_ROLE.into()]),
    )
    .await;
    assert_eq!(
        app.delete(
            &format!("/admin/api/roles/{ADMINS_ROLE}/members/{me}"),
            &admin
        )
        .await
        .status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn non_administrators_are_refused() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "plain@example.com", "password-1", None)
        .await;
    let user = app.login("plain@example.com", "password-1").await;
    for path in [
        "/admin/api/users",
        "/admin/api/roles",
        "/admin/api/settings",
        "/admin/api/audit",
        "/admin/api/tokens",
    ] {
        let answer = app.get(path, &user).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(answer.code(), "PERMISSION_DENIED");
    }
    let anonymous = app
        .call(reqwest::Method::GET, "/admin/api/users", None, None)
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn paging_parameters_out_of_range_are_400_in_our_words() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let huge = app
        .get("/admin/api/users?offset=9223372036854775808", &admin)
        .await;
    assert_eq!(huge.status, StatusCode::BAD_REQUEST);
    assert_eq!(huge.body["errors"][0]["field"], "offset");
    let largest = app
        .get("/admin/api/users?offset=9223372036854775807", &admin)
        .await;
    assert_eq!(largest.status, StatusCode::OK);
    assert_eq!(largest.data().as_array().map(Vec::len), Some(0));
    let overflow = app
        .get("/admin/api/audit?limit=99999999999999999999", &admin)
        .await;
    assert_eq!(overflow.status, StatusCode::BAD_REQUEST);
    let message = overflow.body["errors"][0]["message"].as_str().unwrap();
    assert!(!message.contains("deserialize"), "{message}");
}
