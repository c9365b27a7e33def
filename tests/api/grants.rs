//! Grant administration.

use reqwest::StatusCode;
use serde_json::json;
use testkit::spawn_app;

use crate::USERS_ROLE;

#[tokio::test]
async fn grants_are_validated_listed_and_removed_with_their_table() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app
        .post("/admin/api/schema/public/tables", &admin, json!({ "data": { "name": "notes", "columns": [
            { "name": "id", "dataType": "uuid", "primaryKey": true, "default": "gen_random_uuid()" },
            { "name": "owner_id", "dataType": "uuid" }, { "name": "body", "dataType": "text" } ] } }))
        .await;
    let resource = created.data()["resourceId"].as_str().unwrap().to_owned();

    let grant = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": USERS_ROLE, "resourceId": resource, "action": "read",
            "filter": { "owner_id": { "eq": "$USER.id" } }, "columns": ["id", "body", "id"] } }),
        )
        .await;
    assert_eq!(grant.status, StatusCode::CREATED, "{:?}", grant.body);
    assert_eq!(grant.data()["columns"], json!(["id", "body"]));
    assert_eq!(grant.data()["filter"]["owner_id"]["eq"], "$USER.id");
    let id = grant.data()["id"].as_str().unwrap().to_owned();
    let workflow = app.post("/admin/api/grants", &admin, json!({ "data": { "roleId": USERS_ROLE, "workflowId": uuid::Uuid::now_v7(), "action": "invoke" } })).await;
    assert_eq!(
        workflow.status,
        StatusCode::NOT_FOUND,
        "{:?}",
        workflow.body
    );

    for (data, field) in [
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "write" }),
            "action",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "invoke" }),
            "action",
        ),
        (
            json!({ "roleId": USERS_ROLE, "action": "read" }),
            "resourceId",
        ),
        (
            json!({ "roleId": uuid::Uuid::now_v7(), "resourceId": resource, "action": "read" }),
            "roleId",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": uuid::Uuid::now_v7(), "action": "read" }),
            "resourceId",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "filter": { "nope": { "eq": 1 } } }),
            "filter",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "filter": { "body": { "near": 1 } } }),
            "filter.body.near",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "filter": "owner_id = 1" }),
            "filter",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "columns": ["password"] }),
            "columns[0]",
        ),
        (
            json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "columns": [] }),
            "columns",
        ),
    ] {
        let answer = app
            .post("/admin/api/grants", &admin, json!({ "data": data.clone() }))
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{data}");
        assert_eq!(answer.body["errors"][0]["field"], field, "{data}");
    }

    let listed = app
        .get(&format!("/admin/api/grants?resourceId={resource}"), &admin)
        .await;
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    assert_eq!(
        app.get(&format!("/admin/api/grants?roleId={USERS_ROLE}"), &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        app.delete(&format!("/admin/api/grants/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&format!("/admin/api/grants/{id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // Dropping the table takes its grants along.
    app.post(
        "/admin/api/grants",
        &admin,
        json!({ "data": { "roleId": USERS_ROLE, "resourceId": resource, "action": "delete" } }),
    )
    .await;
    assert_eq!(
        app.delete("/admin/api/schema/public/tables/notes", &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert!(
        app.get(&format!("/admin/api/grants?resourceId={resource}"), &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
}
