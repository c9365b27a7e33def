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

/// Preview as a role: the list route's answer to a member of that role
/// alone, `$USER` standing for the user named (none: nobody), with the
/// list route's refusals; only administrators may ask.
#[tokio::test]
async fn a_preview_reads_what_a_member_of_the_role_alone_reads() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = crate::data::keyed_table(
        &app,
        &admin,
        "notes",
        json!([{ "name": "owner", "dataType": "uuid" },
            { "name": "body", "dataType": "text" },
            { "name": "secret", "dataType": "text" }]),
        &[],
    )
    .await;
    let writers = crate::data::open_to_new_role(
        &app,
        &admin,
        &resource,
        "Writers",
        &["read"],
        json!({ "owner": { "eq": "$USER.id" } }),
        json!(["id", "owner", "body"]),
    )
    .await;
    let (alice, alice_session) =
        crate::data::member(&app, &admin, "alice@example.com", &writers).await;
    let (bob, _) = crate::data::member(&app, &admin, "bob@example.com", &writers).await;
    let rows = json!({ "data": [
        { "owner": alice, "body": "alice's", "secret": "s1" },
        { "owner": bob, "body": "bob's", "secret": "s2" },
    ] });
    let inserted = app.post("/api/data/app/notes", &admin, rows).await;
    assert_eq!(inserted.status, StatusCode::CREATED, "{:?}", inserted.body);
    let preview =
        |role: &str, query: &str| format!("/admin/api/roles/{role}/preview/app/notes?{query}");

    let as_alice = app
        .get(
            &preview(&writers, &format!("count=exact&userId={alice}")),
            &admin,
        )
        .await;
    assert_eq!(as_alice.status, StatusCode::OK, "{:?}", as_alice.body);
    let own = app
        .get("/api/data/app/notes?count=exact", &alice_session)
        .await;
    assert_eq!(as_alice.body, own.body);
    assert_eq!(as_alice.data()[0]["body"], "alice's");
    assert!(as_alice.data()[0].get("secret").is_none());
    let as_nobody = app.get(&preview(&writers, "count=exact"), &admin).await;
    assert_eq!(as_nobody.data(), &json!([]), "{:?}", as_nobody.body);
    assert_eq!(as_nobody.body["meta"]["total"], 0);
    let as_administrators = app
        .get(
            &preview(&kernel::ADMINISTRATORS_ROLE_ID.to_string(), "sort=id"),
            &admin,
        )
        .await;
    assert_eq!(
        as_administrators.data()[1]["secret"],
        "s2",
        "{:?}",
        as_administrators.body
    );

    // The list route's refusals, for the role.
    let users = app
        .get(&preview(&kernel::USERS_ROLE_ID.to_string(), ""), &admin)
        .await;
    assert_eq!(users.status, StatusCode::FORBIDDEN, "{:?}", users.body);
    assert_eq!(users.code(), "PERMISSION_DENIED");
    let bad = app
        .get(&preview(&writers, "filter=%7B%22nope%22"), &admin)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:?}", bad.body);
    assert_eq!(bad.code(), "INVALID_QUERY");
    let hidden = app
        .get(
            &format!("/admin/api/roles/{writers}/preview/app/missing"),
            &admin,
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{:?}", hidden.body);
    let unknown = app
        .get(&preview(&uuid::Uuid::new_v4().to_string(), ""), &admin)
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{:?}", unknown.body);
    // Only administrators may ask.
    let member = app.get(&preview(&writers, ""), &alice_session).await;
    assert_eq!(member.status, StatusCode::FORBIDDEN, "{:?}", member.body);
}
