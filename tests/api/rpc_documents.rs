//! Database functions beyond the call (API.md 18): the role's Data
//! document, snapshots carrying registrations, exposure and grants, the
//! answer ceiling, and GET arguments that are not JSON.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::spawn_app;

use crate::rpc::{call, invoke_grant, registered, shopper, sql};
use crate::snapshot::{apply, diff_of, exported_json};

const FUNCTIONS: [&str; 4] = [
    "CREATE SCHEMA shop",
    "CREATE FUNCTION shop.add(a integer, b integer DEFAULT 10) RETURNS integer \
     LANGUAGE sql IMMUTABLE AS 'SELECT a + b'",
    "CREATE FUNCTION shop.greet(name text) RETURNS text LANGUAGE sql STABLE AS \
     $$ SELECT 'hello ' || name $$",
    "CREATE FUNCTION shop.big(n integer) RETURNS SETOF text LANGUAGE sql STABLE AS \
     $$ SELECT repeat('x', 1000) FROM generate_series(1, n) $$",
];

#[tokio::test]
async fn the_data_document_lists_the_functions_a_role_may_invoke_typed() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(&app, &FUNCTIONS).await;
    let add = registered(&app, &admin, "add", &["GET", "POST"]).await;
    registered(&app, &admin, "greet", &["POST"]).await;
    let (_, role_id, _) = shopper(&app, &admin, "ann@example.com").await;
    let document = |role: String| {
        let app = &app;
        let admin = &admin;
        async move {
            let answer = app
                .get(&format!("/admin/api/openapi/data?role={role}"), admin)
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
            answer.body
        }
    };
    // Control: without the grant the role's document has no function.
    let before = document(role_id.clone()).await;
    assert!(
        before["paths"].get("/api/rpc/shop/add").is_none(),
        "{:?}",
        before["paths"]
    );
    invoke_grant(&app, &admin, &role_id, &add).await;
    let after = document(role_id.clone()).await;
    let path = &after["paths"]["/api/rpc/shop/add"];
    let input =
        &path["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["data"];
    assert_eq!(
        input["properties"]["a"]["type"],
        json!(["integer", "null"]),
        "{path:?}"
    );
    assert_eq!(input["required"], json!(["a"]), "b has a default");
    let output = &path["post"]["responses"]["200"]["content"]["application/json"]["schema"]["properties"]
        ["data"];
    assert_eq!(output["type"], json!(["integer", "null"]), "{path:?}");
    let parameters = path["get"]["parameters"].as_array().unwrap();
    assert_eq!(parameters.len(), 2, "{path:?}");
    assert!(
        after["paths"].get("/api/rpc/shop/greet").is_none(),
        "no grant on greet"
    );
    let admins = app.get("/admin/api/roles", &admin).await;
    let administrators = admins
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Administrators")
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .unwrap();
    let everything = document(administrators).await;
    assert!(everything["paths"]["/api/rpc/shop/greet"]["post"].is_object());
    assert!(
        everything["paths"]["/api/rpc/shop/greet"]
            .get("get")
            .is_none(),
        "greet is exposed for POST only"
    );
}

#[tokio::test]
async fn snapshots_carry_registrations_exposure_and_grants_of_functions() {
    let staging = spawn_app().await;
    let admin = staging.admin_session().await;
    sql(&staging, &FUNCTIONS).await;
    let add = registered(&staging, &admin, "add", &["GET", "POST"]).await;
    let (_, role_id, _) = shopper(&staging, &admin, "ann@example.com").await;
    invoke_grant(&staging, &admin, &role_id, &add).await;
    let exported = exported_json(&staging, &admin).await;
    assert_eq!(
        exported["functions"],
        json!([{ "schema": "shop", "function": "add", "exposedMethods": ["GET", "POST"] }])
    );
    let grant = exported["grants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g.get("function").is_some())
        .cloned()
        .unwrap();
    assert_eq!(grant["function"], "shop.add");
    assert_eq!(grant["action"], "invoke");

    // A target without the function: the diff names it.
    let bare = spawn_app().await;
    let bare_admin = bare.admin_session().await;
    let refused = bare
        .post(
            "/admin/api/snapshot/diff",
            &bare_admin,
            json!({ "data": exported }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.code(), "INVALID_PAYLOAD");
    assert_eq!(refused.body["errors"][0]["field"], "functions[0].function");
    assert!(
        refused.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("shop.add"),
        "{:?}",
        refused.body
    );

    // A target with it: registered, exposed and granted, and the export
    // comes back the same.
    let production = spawn_app().await;
    let prod_admin = production.admin_session().await;
    sql(&production, &FUNCTIONS).await;
    let steps = diff_of(&production, &prod_admin, &exported).await;
    let kinds: Vec<(&str, &str)> = steps
        .iter()
        .filter(|s| s["kind"] == "function")
        .map(|s| (s["action"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("create", "shop.add"), ("alter", "shop.add")]);
    let applied = apply(&production, &prod_admin, json!({ "snapshot": exported })).await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let again = exported_json(&production, &prod_admin).await;
    assert_eq!(again["functions"], exported["functions"]);
    assert_eq!(again["grants"], exported["grants"]);
    assert_eq!(again["roles"], exported["roles"]);
    assert!(
        diff_of(&production, &prod_admin, &exported)
            .await
            .is_empty()
    );
    let (_, _, ann) = {
        let roles = production.get("/admin/api/roles", &prod_admin).await;
        let role = roles
            .data()
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "role ann@example.com")
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .unwrap();
        production
            .create_user(
                &prod_admin,
                "ann@example.com",
                "password-1",
                Some(vec![role]),
            )
            .await;
        let session = production.login("ann@example.com", "password-1").await;
        ((), (), session)
    };
    assert_eq!(
        call(&production, &ann, "add", json!({ "a": 1 })).await.body,
        json!({ "data": 11 })
    );

    // A function's grant takes no row filter.
    let mut filtered = exported.clone();
    let at = filtered["grants"]
        .as_array()
        .unwrap()
        .iter()
        .position(|g| g.get("function").is_some())
        .unwrap();
    filtered["grants"][at]["filter"] = json!({ "id": { "eq": 1 } });
    let refused = production
        .post(
            "/admin/api/snapshot/diff",
            &prod_admin,
            json!({ "data": filtered }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        refused.body["errors"][0]["field"],
        format!("grants[{at}].filter")
    );

    // GET exposure of a volatile function is refused on its path.
    let mut volatile = exported.clone();
    volatile["functions"][0]["exposedMethods"] = json!(["GET"]);
    sql(
        &production,
        &[
            "DROP FUNCTION shop.add(integer, integer)",
            "CREATE FUNCTION shop.add(a integer, b integer DEFAULT 10) RETURNS integer \
             LANGUAGE sql VOLATILE AS 'SELECT a + b'",
        ],
    )
    .await;
    let refused = production
        .post(
            "/admin/api/snapshot/diff",
            &prod_admin,
            json!({ "data": volatile }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        refused.body["errors"][0]["field"],
        "functions[0].exposedMethods[0]"
    );
}

#[tokio::test]
async fn answers_past_the_ceiling_stay_in_the_database_and_get_arguments_may_be_text() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(&app, &FUNCTIONS).await;
    for name in ["greet", "big"] {
        registered(&app, &admin, name, &["GET", "POST"]).await;
    }
    let cap = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.max_answer_bytes": 1_048_576 } }),
        )
        .await;
    assert_eq!(cap.status, StatusCode::OK, "{:?}", cap.body);
    // Control: under the ceiling.
    let small = call(&app, &admin, "big", json!({ "n": 10 })).await;
    assert_eq!(small.status, StatusCode::OK, "{:?}", small.body);
    assert_eq!(small.data().as_array().unwrap().len(), 10);
    let large = call(&app, &admin, "big", json!({ "n": 2000 })).await;
    assert_eq!(large.status, StatusCode::BAD_REQUEST, "{:?}", large.body);
    assert_eq!(large.code(), "INVALID_QUERY");
    assert!(
        large.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("data.max_answer_bytes")
    );
    // A query value that is not JSON is a string; one that is, is decoded.
    let text = app.get("/api/rpc/shop/greet?name=ann", &admin).await;
    assert_eq!(text.body, json!({ "data": "hello ann" }));
    let quoted = app.get("/api/rpc/shop/greet?name=%22bob%22", &admin).await;
    assert_eq!(quoted.body, json!({ "data": "hello bob" }));
    let unknown = app.get("/api/rpc/shop/greet?nom=ann", &admin).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.body["errors"][0]["field"], Value::from("data.nom"));
}
