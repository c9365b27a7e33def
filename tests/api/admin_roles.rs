//! Roles and members.

use reqwest::{Method, StatusCode};
use serde_json::json;
use testkit::spawn_app;

use crate::{ADMINS_ROLE, USERS_ROLE};

#[tokio::test]
async fn built_in_roles_exist_and_stay() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let roles = app.get("/admin/api/roles", &admin).await;
    let names: Vec<_> = roles
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["Administrators", "Users"]);
    assert_eq!(roles.data()[0]["builtIn"], true);
    assert_eq!(roles.data()[0]["apiAccess"], true);
    for id in [ADMINS_ROLE, USERS_ROLE] {
        let answer = app.delete(&format!("/admin/api/roles/{id}"), &admin).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(answer.code(), "INVALID_PAYLOAD");
    }
    let rename = app
        .patch(
            &format!("/admin/api/roles/{USERS_ROLE}"),
            &admin,
            json!({ "data": { "name": "Everyone" } }),
        )
        .await;
    assert_eq!(rename.status, StatusCode::BAD_REQUEST);
    let describe = app
        .patch(
            &format!("/admin/api/roles/{USERS_ROLE}"),
            &admin,
            json!({ "data": { "description": "All members" } }),
        )
        .await;
    assert_eq!(describe.status, StatusCode::OK);
    assert_eq!(describe.data()["description"], "All members");
}

#[tokio::test]
async fn roles_and_members_round_trip() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app.post("/admin/api/roles", &admin, json!({ "data": { "name": "Editors", "description": "Edit content", "apiAccess": true } })).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let role = created.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(created.data()["builtIn"], false);
    let dup = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "editors", "apiAccess": true } }),
        )
        .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    let missing = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "x" } }),
        )
        .await;
    assert_eq!(missing.body["errors"][0]["field"], "apiAccess");

    let user = app
        .create_user(&admin, "ed@example.com", "password-1", Some(vec![]))
        .await;
    let put = app
        .call(
            Method::PUT,
            &format!("/admin/api/roles/{role}/members/{user}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    let again = app
        .call(
            Method::PUT,
            &format!("/admin/api/roles/{role}/members/{user}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    let members = app
        .get(&format!("/admin/api/roles/{role}/members"), &admin)
        .await;
    assert_eq!(members.data().as_array().unwrap().len(), 1);
    assert_eq!(members.data()[0]["email"], "ed@example.com");
    app.login("ed@example.com", "password-1").await;

    // Without API access the role no longer lets its members in.
    let off = app
        .patch(
            &format!("/admin/api/roles/{role}"),
            &admin,
            json!({ "data": { "apiAccess": false } }),
        )
        .await;
    assert_eq!(off.data()["apiAccess"], false);
    assert_eq!(
        app.login_answer("ed@example.com", "password-1")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );

    let unknown = uuid::Uuid::now_v7();
    assert_eq!(
        app.call(
            Method::PUT,
            &format!("/admin/api/roles/{role}/members/{unknown}"),
            Some(&admin),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get(&format!("/admin/api/roles/{unknown}/members"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/admin/api/roles/{role}/members/{user}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert!(
        app.get(&format!("/admin/api/roles/{role}/members"), &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        app.delete(&format!("/admin/api/roles/{role}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&format!("/admin/api/roles/{role}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}
