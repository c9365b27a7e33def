//! The Data API: row routes, grants with row filters and columns, variables,
//! the filter language, errors, CORS and the per-role OpenAPI document.

use kernel::Clock;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app, spawn_app_with_clock};

/// Creates `schema.name` with `columns` and answers its resource id.
pub(crate) async fn create_table(
    app: &TestApp,
    admin: &str,
    schema: &str,
    name: &str,
    columns: Value,
) -> String {
    let answer = app
        .post(
            &format!("/admin/api/schema/{schema}/tables"),
            admin,
            json!({ "data": { "name": name, "columns": columns } }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.data()["resourceId"].as_str().unwrap().to_owned()
}

/// Creates `app.name` with an identity key `id` and `columns` after it,
/// exposed for `methods`; answers its resource id.
pub(crate) async fn keyed_table(
    app: &TestApp,
    admin: &str,
    name: &str,
    columns: Value,
    methods: &[&str],
) -> String {
    let mut all = vec![
        json!({ "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" }),
    ];
    all.extend(columns.as_array().cloned().unwrap_or_default());
    let resource = create_table(app, admin, "app", name, Value::Array(all)).await;
    expose(app, admin, &resource, methods).await;
    resource
}

pub(crate) async fn expose(app: &TestApp, admin: &str, resource: &str, methods: &[&str]) {
    let answer = app
        .patch(
            &format!("/admin/api/resources/{resource}"),
            admin,
            json!({ "data": { "exposedMethods": methods } }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
}

pub(crate) async fn create_role(app: &TestApp, admin: &str, name: &str) -> String {
    let answer = app
        .post(
            "/admin/api/roles",
            admin,
            json!({ "data": { "name": name, "apiAccess": true } }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.data()["id"].as_str().unwrap().to_owned()
}

/// Grants `action` on `resource` to `role`; answers the grant's id.
pub(crate) async fn grant(
    app: &TestApp,
    admin: &str,
    role: &str,
    resource: &str,
    action: &str,
    filter: Value,
    columns: Value,
) -> String {
    let mut data = json!({ "roleId": role, "resourceId": resource, "action": action });
    if !filter.is_null() {
        data["filter"] = filter;
    }
    if !columns.is_null() {
        data["columns"] = columns;
    }
    let answer = app
        .post("/admin/api/grants", admin, json!({ "data": data }))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.data()["id"].as_str().unwrap().to_owned()
}

/// A user in `role`, signed in; answers (id, session).
/// Exposes `resource` for every method and creates role `name` holding
/// each of `actions` on it with `filter` and `columns` (null: none);
/// answers the role's id.
pub(crate) async fn open_to_new_role(
    app: &TestApp,
    admin: &str,
    resource: &str,
    name: &str,
    actions: &[&str],
    filter: Value,
    columns: Value,
) -> String {
    expose(app, admin, resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    let role = create_role(app, admin, name).await;
    for action in actions {
        grant(
            app,
            admin,
            &role,
            resource,
            action,
            filter.clone(),
            columns.clone(),
        )
        .await;
    }
    role
}

pub(crate) async fn member(
    app: &TestApp,
    admin: &str,
    email: &str,
    role: &str,
) -> (String, String) {
    let id = app
        .create_user(
            admin,
            email,
            "member-password-1",
            Some(vec![role.to_owned()]),
        )
        .await;
    (id, app.login(email, "member-password-1").await)
}

fn ids(answer: &testkit::Answer) -> Vec<i64> {
    answer
        .data()
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {:?}", answer.body))
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

pub(crate) fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The notes table: rows owned by users, with a column no grant covers.
async fn notes(app: &TestApp, admin: &str) -> String {
    create_table(app, admin, "app", "notes", json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
        { "name": "owner_id", "dataType": "uuid", "nullable": false },
        { "name": "title", "dataType": "text", "nullable": false, "check": "length(title) <= 20", "checkMessage": "Titles are at most 20 characters" },
        { "name": "secret", "dataType": "text" },
    ]))
    .await
}

#[tokio::test]
async fn user_row_filters_isolate_users_with_sessions_and_tokens() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let own = json!({ "owner_id": { "eq": "$USER.id" } });
    let columns = json!(["id", "owner_id", "title"]);
    let all = ["read", "create", "update", "delete"];
    let role = open_to_new_role(&app, &admin, &resource, "Writers", &all, own, columns).await;
    let (alice, alice_session) = member(&app, &admin, "alice@example.com", &role).await;
    let (bob, bob_session) = member(&app, &admin, "bob@example.com", &role).await;
    let bob_token = app.create_token(&bob_session, "API").await;

    let mine = app
        .post(
            "/api/data/app/notes",
            &alice_session,
            json!({ "data": { "owner_id": alice, "title": "alice 1" } }),
        )
        .await;
    assert_eq!(mine.status, StatusCode::CREATED, "{:?}", mine.body);
    assert_eq!(mine.data()["title"], "alice 1");
    assert!(mine.data().get("secret").is_none(), "{:?}", mine.body);
    let alice_note = mine.data()["id"].as_i64().unwrap();
    let bulk = app
        .post(
            "/api/data/app/notes",
            &bob_token,
            json!({ "data": [
        { "owner_id": bob, "title": "bob 1" }, { "owner_id": bob, "title": "bob 2" } ] }),
        )
        .await;
    assert_eq!(bulk.status, StatusCode::CREATED, "{:?}", bulk.body);
    assert_eq!(bulk.data().as_array().unwrap().len(), 2);
    let bob_note = bulk.data()[0]["id"].as_i64().unwrap();

    // A row for someone else is refused, and nothing of the request is written.
    let forged = app
        .post(
            "/api/data/app/notes",
            &alice_session,
            json!({ "data": [
        { "owner_id": alice, "title": "fine" }, { "owner_id": bob, "title": "forged" } ] }),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{:?}", forged.body);
    assert_eq!(forged.code(), "PERMISSION_DENIED");

    let alice_list = app
        .get("/api/data/app/notes?count=exact", &alice_session)
        .await;
    assert_eq!(alice_list.status, StatusCode::OK, "{:?}", alice_list.body);
    assert_eq!(ids(&alice_list), vec![alice_note]);
    assert_eq!(
        alice_list.body["meta"],
        json!({ "limit": 100, "offset": 0, "total": 1 })
    );
    let bob_list = app.get("/api/data/app/notes", &bob_token).await;
    assert_eq!(bob_list.data().as_array().unwrap().len(), 2);
    assert!(
        bob_list
            .data()
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["owner_id"] == json!(bob))
    );

    // Someone else's row is not found, whatever the method.
    let other = format!("/api/data/app/notes/{bob_note}");
    assert_eq!(
        app.get(&other, &alice_session).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.patch(&other, &alice_session, json!({ "data": { "title": "x" } }))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&other, &alice_session).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get(&other, &bob_token).await.status, StatusCode::OK);

    // An update may not move a row out of the grant.
    let mine_path = format!("/api/data/app/notes/{alice_note}");
    let moved = app
        .patch(
            &mine_path,
            &alice_session,
            json!({ "data": { "owner_id": bob } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::FORBIDDEN, "{:?}", moved.body);
    let renamed = app
        .patch(
            &mine_path,
            &alice_session,
            json!({ "data": { "title": "renamed" } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.data()["title"], "renamed");
    assert_eq!(renamed.data()["owner_id"], json!(alice));

    // Columns outside the grant.
    let hidden = app
        .get("/api/data/app/notes?select=id,secret", &alice_session)
        .await;
    assert_eq!(
        (hidden.status, hidden.code()),
        (StatusCode::BAD_REQUEST, "INVALID_QUERY")
    );
    assert_eq!(hidden.body["errors"][0]["field"], "select");
    let write_hidden = app
        .post(
            "/api/data/app/notes",
            &alice_session,
            json!({ "data": { "owner_id": alice, "title": "t", "secret": "s" } }),
        )
        .await;
    assert_eq!(
        (write_hidden.status, write_hidden.code()),
        (StatusCode::BAD_REQUEST, "INVALID_PAYLOAD")
    );
    assert_eq!(write_hidden.body["errors"][0]["field"], "secret");

    // Administrators see every row and column.
    let all = app.get("/api/data/app/notes?sort=id", &admin).await;
    assert_eq!(ids(&all), vec![alice_note, bob_note, bob_note + 1]);
    assert!(all.data()[0].as_object().unwrap().contains_key("secret"));

    assert_eq!(
        app.delete(&mine_path, &alice_session).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&mine_path, &alice_session).await.status,
        StatusCode::NOT_FOUND
    );

    // Writes are audited with their actor: the token for a token, the user for a session.
    let audit = app.get("/admin/api/audit?action=data.create", &admin).await;
    let entries = audit.data().as_array().unwrap();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries.iter().any(|e| e["actorType"] == "token"));
    let bulk_entry = entries.iter().find(|e| e["actorType"] == "token").unwrap();
    assert_eq!(bulk_entry["target"], format!("resource:{resource}"));
    assert!(
        entries.iter().all(|e| e["ip"] == "127.0.0.1"),
        "{entries:?}"
    );
    assert_eq!(
        bulk_entry["details"],
        json!({ "schema": "app", "table": "notes", "count": 2, "keys": [[bob_note], [bob_note + 1]] })
    );
    assert!(
        entries
            .iter()
            .any(|e| e["actorType"] == "user" && e["actorId"] == json!(alice))
    );
    assert_eq!(
        app.get("/admin/api/audit?action=data.delete", &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn exposure_grants_and_keys_decide_the_status() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let role = create_role(&app, &admin, "Readers").await;
    let (_, reader) = member(&app, &admin, "reader@example.com", &role).await;

    assert_eq!(
        app.get("/api/data/app/notes", &reader).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/data/app/notes", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/data/app/nothing", &reader).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.call(Method::GET, "/api/data/app/notes", None, None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    expose(&app, &admin, &resource, &["GET"]).await;
    let denied = app.get("/api/data/app/notes", &reader).await;
    assert_eq!(
        (denied.status, denied.code()),
        (StatusCode::FORBIDDEN, "PERMISSION_DENIED")
    );
    let post = app
        .post(
            "/api/data/app/notes",
            &reader,
            json!({ "data": { "title": "x" } }),
        )
        .await;
    assert_eq!(
        (post.status, post.code()),
        (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED")
    );
    assert_eq!(post.headers["allow"], "GET");
    // Exposure and grants are decided before the body is read.
    let no_body = app
        .call(Method::PATCH, "/api/data/app/notes/1", Some(&reader), None)
        .await;
    assert_eq!(
        no_body.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{:?}",
        no_body.body
    );
    for method in [Method::PUT, Method::TRACE] {
        let other = app
            .call(method.clone(), "/api/data/app/notes", Some(&reader), None)
            .await;
        assert_eq!(
            other.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}: {:?}",
            other.body
        );
        let hidden = app
            .call(method, "/api/data/app/nothing/1", Some(&reader), None)
            .await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    }
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    // The grant applies at once: this instance drops its catalog on the change.
    assert_eq!(
        app.get("/api/data/app/notes", &reader).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get("/api/data/app/notes/not-a-number", &reader)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/data/app/notes/99", &reader).await.status,
        StatusCode::NOT_FOUND
    );
    // An ADMIN token is for the Admin API only.
    let admin_token = app.create_token(&admin, "ADMIN").await;
    assert_eq!(
        app.get("/api/data/app/notes", &admin_token).await.status,
        StatusCode::FORBIDDEN
    );
}

/// Items with one column of each common type, filled by an administrator.
async fn items(app: &TestApp, admin: &str) {
    let resource = create_table(
        app,
        admin,
        "app",
        "items",
        json!([
            { "name": "id", "dataType": "integer", "primaryKey": true },
            { "name": "name", "dataType": "text", "nullable": false },
            { "name": "qty", "dataType": "integer" },
            { "name": "price", "dataType": "numeric(10,2)" },
            { "name": "active", "dataType": "boolean", "nullable": false, "default": "true" },
            { "name": "born", "dataType": "date" },
            { "name": "meta", "dataType": "jsonb" },
            { "name": "sku", "dataType": "text", "nullable": true },
        ]),
    )
    .await;
    expose(app, admin, &resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    let rows = json!([
        { "id": 1, "name": "apple", "qty": 5, "price": "1.50", "born": "2026-01-01", "meta": { "color": "red" }, "sku": "A-1" },
        { "id": 2, "name": "Banana", "qty": 0, "price": 0.25, "active": false, "born": "2026-02-01", "sku": "B-2" },
        { "id": 3, "name": "cherry", "qty": 12, "price": "7.00", "born": "2026-03-01" },
        { "name": "date", "id": 4, "qty": null, "price": "2.10", "born": "2026-04-01", "sku": "D-4" },
    ]);
    let created = app
        .post("/api/data/app/items", admin, json!({ "data": rows }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(ids(&created), vec![1, 2, 3, 4]);
    assert_eq!(created.data()[1]["active"], false);
    assert_eq!(created.data()[0]["active"], true);
    assert_eq!(created.data()[0]["meta"], json!({ "color": "red" }));
}

#[tokio::test]
async fn every_operator_sort_paging_and_count() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    items(&app, &admin).await;
    for (filter, expected) in [
        (json!({ "qty": { "eq": 5 } }), vec![1]),
        (json!({ "qty": { "neq": 5 } }), vec![2, 3]),
        (json!({ "qty": { "gt": 0 } }), vec![1, 3]),
        (json!({ "qty": { "gte": 0 } }), vec![1, 2, 3]),
        (json!({ "qty": { "lt": 5 } }), vec![2]),
        (json!({ "qty": { "lte": 5 } }), vec![1, 2]),
        (json!({ "id": { "in": [1, 3, 9] } }), vec![1, 3]),
        (json!({ "id": { "nin": [1, 3] } }), vec![2, 4]),
        (json!({ "id": { "in": [] } }), vec![]),
        (json!({ "name": { "like": "%an%" } }), vec![2]),
        (json!({ "name": { "ilike": "b%" } }), vec![2]),
        (json!({ "qty": { "isNull": true } }), vec![4]),
        (json!({ "qty": { "isNull": false } }), vec![1, 2, 3]),
        (json!({ "sku": { "eq": null } }), vec![3]),
        (json!({ "price": { "gte": "2.10" } }), vec![3, 4]),
        (json!({ "active": { "eq": false } }), vec![2]),
        (
            json!({ "born": { "gte": "2026-02-15", "lt": "2026-04-01" } }),
            vec![3],
        ),
        (
            json!({ "or": [ { "id": { "eq": 1 } }, { "and": [ { "qty": { "gt": 10 } }, { "not": { "name": { "eq": "x" } } } ] } ] }),
            vec![1, 3],
        ),
        (
            json!({ "not": { "or": [ { "id": { "eq": 1 } }, { "id": { "eq": 2 } } ] } }),
            vec![3, 4],
        ),
    ] {
        let answer = app
            .get(
                &format!(
                    "/api/data/app/items?sort=id&filter={}",
                    encode(&filter.to_string())
                ),
                &admin,
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{filter}: {:?}", answer.body);
        assert_eq!(ids(&answer), expected, "{filter}");
    }
    let sorted = app.get("/api/data/app/items?sort=-price", &admin).await;
    assert_eq!(ids(&sorted), vec![3, 4, 1, 2]);
    let by_two = app
        .get(
            "/api/data/app/items?sort=-active,name&select=id,name",
            &admin,
        )
        .await;
    assert_eq!(ids(&by_two), vec![1, 3, 4, 2]);
    assert_eq!(by_two.data()[0], json!({ "id": 1, "name": "apple" }));
    let page = app
        .get(
            "/api/data/app/items?sort=id&limit=2&offset=1&count=exact",
            &admin,
        )
        .await;
    assert_eq!(ids(&page), vec![2, 3]);
    assert_eq!(
        page.body["meta"],
        json!({ "limit": 2, "offset": 1, "total": 4 })
    );
    let beyond = app.get("/api/data/app/items?offset=10", &admin).await;
    assert_eq!(beyond.data(), &json!([]));
    assert!(beyond.body["meta"].get("total").is_none());
    let blank = app
        .get(
            "/api/data/app/items?select=&filter=&sort=&limit=&offset=&count=",
            &admin,
        )
        .await;
    assert_eq!(ids(&blank), vec![1, 2, 3, 4], "{:?}", blank.body);
    let one = app.get("/api/data/app/items/3", &admin).await;
    assert_eq!(one.data()["name"], "cherry");
    assert_eq!(one.data()["price"], 7.0);
}

#[tokio::test]
async fn bad_queries_and_bodies_are_400_with_a_field() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    items(&app, &admin).await;
    let long: Vec<i32> = (0..1001).collect();
    for (query, field) in [
        ("select=id,nope".to_owned(), "select"),
        ("sort=nope".to_owned(), "sort"),
        ("limit=0".to_owned(), "limit"),
        ("limit=1001".to_owned(), "limit"),
        ("limit=ten".to_owned(), "limit"),
        ("offset=-1".to_owned(), "offset"),
        ("count=estimated".to_owned(), "count"),
        ("filter=%7Bnot-json".to_owned(), "filter"),
        (
            format!("filter={}", encode(r#"{"nope":{"eq":1}}"#)),
            "filter",
        ),
        (
            format!("filter={}", encode(r#"{"qty":{"like":"%1%"}}"#)),
            "filter",
        ),
        (
            format!("filter={}", encode(r#"{"qty":{"gt":"abc"}}"#)),
            "filter",
        ),
        (
            format!("filter={}", encode(r#"{"qty":{"between":1}}"#)),
            "filter.qty.between",
        ),
        (
            format!(
                "filter={}",
                encode(&json!({ "id": { "in": long } }).to_string())
            ),
            "filter.id.in",
        ),
        (
            format!("filter={}", encode(r#"{"born":{"gt":"not a date"}}"#)),
            "filter",
        ),
        (
            format!("filter={}", encode(r#"{"qty":{"eq":"$PERIOD.today"}}"#)),
            "filter",
        ),
        (
            format!(
                "filter={}",
                encode(r#"{"name":{"eq":"$USER.password_hash"}}"#)
            ),
            "filter",
        ),
    ] {
        let answer = app
            .get(&format!("/api/data/app/items?{query}"), &admin)
            .await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, "INVALID_QUERY"),
            "{query}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["errors"][0]["field"], field, "{query}");
    }
    for (body, field) in [
        (json!({ "data": { "id": 9, "nope": 1 } }), Some("nope")),
        (json!({ "data": { "id": "nine", "name": "x" } }), Some("id")),
        (
            json!({ "data": [ { "id": 9, "name": "x" }, 5 ] }),
            Some("[1]"),
        ),
        (json!({ "data": [] }), Some("data")),
        (json!({ "data": "row" }), Some("data")),
        (
            json!({ "data": { "id": 9, "name": "x", "born": "someday" } }),
            None,
        ),
    ] {
        let answer = app.post("/api/data/app/items", &admin, body.clone()).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, "INVALID_PAYLOAD"),
            "{body}: {:?}",
            answer.body
        );
        if let Some(field) = field {
            assert_eq!(answer.body["errors"][0]["field"], field, "{body}");
        }
        assert!(
            !answer.body.to_string().contains("SELECT"),
            "{:?}",
            answer.body
        );
    }
    let missing = app
        .post(
            "/api/data/app/items",
            &admin,
            json!({ "data": { "id": 9 } }),
        )
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (StatusCode::BAD_REQUEST, "NOT_NULL_VIOLATION"),
        "{:?}",
        missing.body
    );
    assert_eq!(missing.body["errors"][0]["field"], "name");
    let nothing = app
        .post("/api/data/app/items", &admin, json!({ "data": {} }))
        .await;
    assert_eq!(
        (nothing.status, nothing.code()),
        (StatusCode::BAD_REQUEST, "NOT_NULL_VIOLATION"),
        "{:?}",
        nothing.body
    );
    let duplicate = app
        .post(
            "/api/data/app/items",
            &admin,
            json!({ "data": [ { "id": 8, "name": "new" }, { "id": 1, "name": "again" } ] }),
        )
        .await;
    assert_eq!(
        (duplicate.status, duplicate.code()),
        (StatusCode::CONFLICT, "CONFLICT")
    );
    // The bulk insert was one transaction: row 8 is not there either.
    assert_eq!(
        app.get("/api/data/app/items/8", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    let empty = app
        .patch("/api/data/app/items/1", &admin, json!({ "data": {} }))
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);

    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["POST"]).await;
    let long_title = app.post("/api/data/app/notes", &admin, json!({ "data": { "owner_id": uuid::Uuid::now_v7(), "title": "far too long for the check" } })).await;
    assert_eq!(
        (long_title.status, long_title.code()),
        (StatusCode::BAD_REQUEST, "CHECK_VIOLATION"),
        "{:?}",
        long_title.body
    );
    assert_eq!(
        long_title.body["errors"][0]["message"],
        "Titles are at most 20 characters"
    );
    let generated = app
        .post(
            "/api/data/app/notes",
            &admin,
            json!({ "data": { "id": 5, "owner_id": uuid::Uuid::now_v7(), "title": "t" } }),
        )
        .await;
    assert_eq!(generated.status, StatusCode::BAD_REQUEST);
    assert_eq!(generated.body["errors"][0]["field"], "id");
}

#[tokio::test]
async fn period_today_is_cut_in_the_callers_zone() {
    let app = spawn_app_with_clock().await;
    let clock = app.clock.clone().unwrap();
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-10T20:00:00Z")
        .unwrap()
        .to_utc();
    clock.advance(at - clock.now());
    let admin = app.admin_session().await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "events",
        json!([
            { "name": "id", "dataType": "integer", "primaryKey": true },
            { "name": "at", "dataType": "timestamptz", "nullable": false },
        ]),
    )
    .await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;
    // Los Angeles' today is [10 Mar 07:00Z, 11 Mar 07:00Z); Auckland's is [10 Mar 11:00Z, 11 Mar 11:00Z).
    let rows = json!([
        { "id": 1, "at": "2026-03-10T08:00:00Z" },
        { "id": 2, "at": "2026-03-11T09:00:00Z" },
        { "id": 3, "at": "2026-03-10T15:00:00Z" },
    ]);
    assert_eq!(
        app.post("/api/data/app/events", &admin, json!({ "data": rows }))
            .await
            .status,
        StatusCode::CREATED
    );
    let role = create_role(&app, &admin, "Today").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        json!({ "at": { "eq": "$PERIOD.today" } }),
        Value::Null,
    )
    .await;
    let zoned = |email: &'static str, zone: Option<&'static str>| {
        let app = &app;
        let admin = admin.clone();
        let role = role.clone();
        async move {
            let mut data =
                json!({ "email": email, "password": "member-password-1", "roleIds": [role] });
            if let Some(zone) = zone {
                data["timezone"] = json!(zone);
            }
            let created = app
                .post("/admin/api/users", &admin, json!({ "data": data }))
                .await;
            assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
            app.login(email, "member-password-1").await
        }
    };
    let auckland = zoned("nz@example.com", Some("Pacific/Auckland")).await;
    let los_angeles = zoned("la@example.com", Some("America/Los_Angeles")).await;
    let unzoned = zoned("utc@example.com", None).await;
    let list = |session: String, header: Option<&'static str>| {
        let app = &app;
        async move {
            let mut request = app
                .client
                .get(format!("{}/api/data/app/events?sort=id", app.address))
                .bearer_auth(session);
            if let Some(zone) = header {
                request = request.header("X-Service-Timezone", zone);
            }
            let answer = TestApp::answer(request.send().await.unwrap()).await;
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
            ids(&answer)
        }
    };
    assert_eq!(list(auckland.clone(), None).await, vec![2, 3]);
    assert_eq!(
        list(los_angeles.clone(), Some("Pacific/Auckland")).await,
        vec![1, 3]
    );
    // No preference, no system zone: the header, and UTC when it is not a zone.
    assert_eq!(
        list(unzoned.clone(), Some("Pacific/Auckland")).await,
        vec![2, 3]
    );
    assert_eq!(list(unzoned.clone(), Some("Not/AZone")).await, vec![1, 3]);
    assert_eq!(list(unzoned.clone(), None).await, vec![1, 3]);
    // The system zone comes before the header, after the user's preference.
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "system.timezone": "Pacific/Auckland" } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    assert_eq!(list(unzoned, Some("America/Los_Angeles")).await, vec![2, 3]);
    assert_eq!(list(los_angeles, None).await, vec![1, 3]);
}

#[tokio::test]
async fn service_tables_never_show_secrets() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resources = app.get("/admin/api/resources", &admin).await;
    let users = resources
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["schema"] == "svc" && r["table"] == "users")
        .expect("svc.users is registered")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    expose(&app, &admin, &users, &["GET"]).await;
    let role = create_role(&app, &admin, "Self").await;
    grant(
        &app,
        &admin,
        &role,
        &users,
        "read",
        json!({ "id": { "eq": "$USER.id" } }),
        Value::Null,
    )
    .await;
    let (me, session) = member(&app, &admin, "self@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    for credential in [&session, &token] {
        let list = app.get("/api/data/svc/users", credential).await;
        assert_eq!(list.status, StatusCode::OK, "{:?}", list.body);
        let rows = list.data().as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["id"], json!(me));
        assert_eq!(rows[0]["email"], "self@example.com");
    }
    let everyone = app.get("/api/data/svc/users", &admin).await;
    assert!(everyone.data().as_array().unwrap().len() >= 2);
    let text = everyone.body.to_string();
    assert!(
        !text.contains("password_hash") && !text.contains("argon2"),
        "{text}"
    );
    let secret = app
        .get("/api/data/svc/users?select=password_hash", &admin)
        .await;
    assert_eq!(secret.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.get("/api/data/svc/sessions", &admin).await.status,
        StatusCode::NOT_FOUND
    );

    // The rules of the Admin API hold through the Data API too.
    let resources = resources.data().as_array().unwrap();
    let find = |table: &str| {
        resources
            .iter()
            .find(|r| r["schema"] == "svc" && r["table"] == table)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    expose(&app, &admin, &find("role_members"), &["GET", "DELETE"]).await;
    expose(&app, &admin, &find("roles"), &["PATCH", "DELETE"]).await;
    expose(&app, &admin, &users, &["GET", "PATCH"]).await;
    let me_admin = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let memberships = app
        .get(
            &format!(
                "/api/data/svc/role_members?filter={}",
                encode(&json!({ "user_id": { "eq": me_admin } }).to_string())
            ),
            &admin,
        )
        .await;
    assert_eq!(
        memberships.data()[0]["role_id"],
        crate::ADMINS_ROLE,
        "{:?}",
        memberships.body
    );
    let last = app
        .delete(
            &format!(
                "/api/data/svc/role_members/{me_admin},{}",
                crate::ADMINS_ROLE
            ),
            &admin,
        )
        .await;
    assert_eq!(
        (last.status, last.code()),
        (StatusCode::CONFLICT, "CONFLICT"),
        "{:?}",
        last.body
    );
    let deactivate = app
        .patch(
            &format!("/api/data/svc/users/{me_admin}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(
        deactivate.status,
        StatusCode::CONFLICT,
        "{:?}",
        deactivate.body
    );
    let built_in = app
        .delete(
            &format!("/api/data/svc/roles/{}", crate::USERS_ROLE),
            &admin,
        )
        .await;
    assert_eq!(built_in.status, StatusCode::CONFLICT, "{:?}", built_in.body);
    let renamed = app
        .patch(
            &format!("/api/data/svc/roles/{}", crate::ADMINS_ROLE),
            &admin,
            json!({ "data": { "admin_access": false } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::CONFLICT, "{:?}", renamed.body);
    // Ordinary rows still change.
    let renamed_user = app
        .patch(
            &format!("/api/data/svc/users/{me}"),
            &admin,
            json!({ "data": { "name": "Renamed" } }),
        )
        .await;
    assert_eq!(
        renamed_user.data()["name"],
        "Renamed",
        "{:?}",
        renamed_user.body
    );
}

#[tokio::test]
async fn cors_follows_the_setting_at_request_time() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let preflight = |origin: &'static str| {
        let app = &app;
        async move {
            app.client
                .request(
                    Method::OPTIONS,
                    format!("{}/api/data/app/notes", app.address),
                )
                .header("Origin", origin)
                .header("Access-Control-Request-Method", "POST")
                .header(
                    "Access-Control-Request-Headers",
                    "authorization, content-type",
                )
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        preflight("https://app.example").await.status(),
        StatusCode::FORBIDDEN
    );
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "security.cors_origins": ["https://app.example"] } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    let allowed = preflight("https://app.example").await;
    assert_eq!(allowed.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert_eq!(
        allowed.headers()["access-control-allow-credentials"],
        "true"
    );
    assert!(
        allowed.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("PATCH")
    );
    // Read replicas' consistency token may be sent back by a browser.
    assert!(
        allowed.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("Tessera-Consistency-Token")
    );
    assert_eq!(
        preflight("https://evil.example").await.status(),
        StatusCode::FORBIDDEN
    );
    let simple = app
        .client
        .get(format!("{}/api/auth/me", app.address))
        .bearer_auth(&admin)
        .header("Origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        simple.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert!(
        simple.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("Tessera-Consistency-Token")
    );
    let other = app
        .client
        .get(format!("{}/api/auth/me", app.address))
        .bearer_auth(&admin)
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "security.cors_origins": ["*"] } }),
    )
    .await;
    let any = preflight("https://evil.example").await;
    assert_eq!(any.headers()["access-control-allow-origin"], "*");
    assert!(
        any.headers()
            .get("access-control-allow-credentials")
            .is_none()
    );
}

#[tokio::test]
async fn the_data_openapi_document_shows_what_a_role_may_do() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET", "POST", "DELETE"]).await;
    let role = create_role(&app, &admin, "Viewers").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        json!(["id", "title"]),
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "update",
        Value::Null,
        Value::Null,
    )
    .await;
    let doc = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    assert_eq!(doc.status, StatusCode::OK, "{:?}", doc.body);
    assert_eq!(doc.body["openapi"], "3.1.0");
    let paths = doc.body["paths"].as_object().unwrap();
    let collection = &paths["/api/data/app/notes"];
    assert!(collection.get("get").is_some());
    assert!(collection.get("post").is_none(), "no create grant");
    // PATCH is granted but not exposed; DELETE is exposed but not granted.
    assert!(
        paths
            .get("/api/data/app/notes/{pk}")
            .is_some_and(|p| p.get("patch").is_none() && p.get("delete").is_none())
    );
    let columns = doc.body["components"]["schemas"]["app.notes"]["properties"]
        .as_object()
        .unwrap();
    assert_eq!(columns.keys().collect::<Vec<_>>(), vec!["id", "title"]);
    assert_eq!(columns["id"]["type"], "integer");
    let nothing = app
        .get(
            &format!("/admin/api/openapi/data?role={}", crate::USERS_ROLE),
            &admin,
        )
        .await;
    assert_eq!(nothing.body["paths"], json!({}));
    let everything = app
        .get(
            &format!("/admin/api/openapi/data?role={}", crate::ADMINS_ROLE),
            &admin,
        )
        .await;
    assert!(
        everything.body["paths"]["/api/data/app/notes"]
            .get("post")
            .is_some()
    );
    // Every operation the document shows is served: each answers 2xx.
    let owner = app.get("/api/auth/me", &admin).await.data()["id"].clone();
    let row = json!({ "data": { "owner_id": owner, "title": "probe" } });
    let first = app.post("/api/data/app/notes", &admin, row.clone()).await;
    let pk = &first.data()["id"].to_string();
    let mut operations: Vec<(String, String)> = everything.body["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.starts_with("/api/data/app/"))
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |method| (method.clone(), path.replace("{pk}", pk)))
        })
        .collect();
    // The email templates are exposed for reading and editing from the start.
    let templates = &everything.body["paths"]["/api/data/svc/email_templates/{pk}"];
    assert!(templates.get("get").is_some() && templates.get("patch").is_some());
    operations.sort_by_key(|(method, _)| method == "delete");
    assert_eq!(operations.len(), 4, "{operations:?}");
    for (method, path) in operations {
        let body = (method == "post").then(|| row.clone());
        let answer = app
            .call(
                method.to_uppercase().parse().unwrap(),
                &path,
                Some(&admin),
                body,
            )
            .await;
        assert!(
            answer.status.is_success(),
            "{method} {path}: {:?}",
            answer.body
        );
    }
    assert_eq!(
        app.get(
            &format!("/admin/api/openapi/data?role={}", uuid::Uuid::now_v7()),
            &admin
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    let (_, member_session) = member(&app, &admin, "viewer@example.com", &role).await;
    assert_eq!(
        app.get(
            &format!("/admin/api/openapi/data?role={role}"),
            &member_session
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
}

/// A small deterministic generator, so a failure can be replayed.
/// A small deterministic generator for the property tests.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }

    /// One of `from`, at random.
    pub(crate) fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.next(from.len())]
    }
}

fn random_value(rng: &mut Lcg) -> Value {
    match rng.next(10) {
        0 => json!(rng.next(20) as i64 - 5),
        1 => json!("t".repeat(rng.next(3))),
        2 => json!(rng.next(2) == 0),
        3 => Value::Null,
        4 => json!("$USER.id"),
        5 => json!("$PERIOD.today"),
        6 => json!(1.5),
        7 => json!(
            [
                "2026-01-01T00:00:00Z",
                "nul\u{0}byte",
                "$USER.email",
                "$USER.nope"
            ][rng.next(4)]
        ),
        8 => json!(18_446_744_073_709_551_615_u64),
        _ => json!("%'; DROP TABLE app.notes; --"),
    }
}

fn random_filter(rng: &mut Lcg, depth: usize) -> Value {
    const COLUMNS: [&str; 5] = ["id", "owner_id", "title", "secret", "nope"];
    const OPS: [&str; 12] = [
        "eq", "neq", "gt", "gte", "lt", "lte", "in", "nin", "like", "ilike", "isNull", "bad",
    ];
    match rng.next(if depth > 3 { 1 } else { 4 }) {
        0 => {
            let op = OPS[rng.next(OPS.len())];
            let value = match op {
                "in" | "nin" => json!(
                    (0..rng.next(4))
                        .map(|_| random_value(rng))
                        .collect::<Vec<_>>()
                ),
                "isNull" if rng.next(3) > 0 => json!(rng.next(2) == 0),
                _ => random_value(rng),
            };
            json!({ COLUMNS[rng.next(COLUMNS.len())]: { op: value } })
        }
        1 => {
            json!({ "and": (0..rng.next(3)).map(|_| random_filter(rng, depth + 1)).collect::<Vec<_>>() })
        }
        2 => {
            json!({ "or": (0..rng.next(3)).map(|_| random_filter(rng, depth + 1)).collect::<Vec<_>>() })
        }
        _ => json!({ "not": random_filter(rng, depth + 1) }),
    }
}

#[tokio::test]
async fn random_filters_never_fail_and_never_leave_the_grant() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;
    let role = create_role(&app, &admin, "Fuzz").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        json!({ "owner_id": { "eq": "$USER.id" } }),
        Value::Null,
    )
    .await;
    let (alice, session) = member(&app, &admin, "fuzz@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    let other = uuid::Uuid::now_v7().to_string();
    let rows: Vec<Value> = (0..30)
        .map(|i| json!({ "owner_id": if i % 2 == 0 { &alice } else { &other }, "title": "t".repeat(i % 3), "secret": if i % 4 == 0 { Value::Null } else { json!("s") } }))
        .collect();
    assert_eq!(
        app.post("/api/data/app/notes", &admin, json!({ "data": rows }))
            .await
            .status,
        StatusCode::CREATED
    );
    let mut rng = Lcg(0x5eed);
    let mut answered = 0;
    for _ in 0..400 {
        let filter = random_filter(&mut rng, 0);
        let answer = app
            .get(
                &format!("/api/data/app/notes?filter={}", encode(&filter.to_string())),
                &token,
            )
            .await;
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::BAD_REQUEST,
            "{filter}: {:?}",
            answer.body
        );
        if answer.status == StatusCode::OK {
            answered += 1;
            for row in answer.data().as_array().unwrap() {
                assert_eq!(row["owner_id"], json!(alice), "{filter} leaked {row}");
            }
        }
    }
    assert!(answered > 50, "only {answered} filters were valid");

    // Random bodies: never a 500, and never a row for someone else.
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "create",
        json!({ "owner_id": { "eq": "$USER.id" } }),
        Value::Null,
    )
    .await;
    const KEYS: [&str; 5] = ["id", "owner_id", "title", "secret", "nope"];
    let mut created = 0;
    for _ in 0..200 {
        let mut row = serde_json::Map::new();
        row.insert(
            "owner_id".into(),
            json!(if rng.next(3) == 0 { &other } else { &alice }),
        );
        row.insert("title".into(), json!("fuzz"));
        for _ in 0..rng.next(3) {
            let value = match rng.next(3) {
                0 => json!(alice),
                1 => json!(other),
                _ => random_value(&mut rng),
            };
            row.insert(KEYS[rng.next(KEYS.len())].to_owned(), value);
        }
        let body = if rng.next(3) == 0 {
            json!([row.clone(), row])
        } else {
            Value::Object(row)
        };
        let answer = app
            .post("/api/data/app/notes", &token, json!({ "data": body }))
            .await;
        assert!(
            [
                StatusCode::CREATED,
                StatusCode::BAD_REQUEST,
                StatusCode::FORBIDDEN
            ]
            .contains(&answer.status),
            "{body}: {:?}",
            answer.body
        );
        if answer.status == StatusCode::CREATED {
            created += 1;
        }
    }
    assert!(created > 5, "only {created} bodies were valid");
    let filter = encode(&json!({ "owner_id": { "eq": other } }).to_string());
    let others = app
        .get(
            &format!("/api/data/app/notes?count=exact&limit=1&filter={filter}"),
            &admin,
        )
        .await;
    assert_eq!(
        others.body["meta"]["total"], 15,
        "a row was created for someone else"
    );
}

#[tokio::test]
async fn every_read_checks_the_caller_afresh() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET"]).await;
    let role = create_role(&app, &admin, "Readers").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        json!(["id", "title"]),
    )
    .await;
    let other = create_role(&app, &admin, "Owners").await;
    grant(
        &app,
        &admin,
        &other,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let (user, session) = member(&app, &admin, "fresh@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    let notes_path = "/api/data/app/notes";
    // The second read is planned for the caller of the first.
    for _ in 0..2 {
        let read = app.get(notes_path, &token).await;
        assert_eq!(read.status, StatusCode::OK, "{:?}", read.body);
        let hidden = app
            .get("/api/data/app/notes?select=id,secret", &token)
            .await;
        assert_eq!(hidden.status, StatusCode::BAD_REQUEST, "{:?}", hidden.body);
    }
    // A new role shows more columns on the very next read.
    let added = app
        .call(
            Method::PUT,
            &format!("/admin/api/roles/{other}/members/{user}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(added.status, StatusCode::NO_CONTENT);
    let wider = app
        .get("/api/data/app/notes?select=id,secret", &token)
        .await;
    assert_eq!(wider.status, StatusCode::OK, "{:?}", wider.body);
    // Removed roles and revoked tokens apply on the next read, too.
    for role in [&role, &other] {
        let removed = app
            .call(
                Method::DELETE,
                &format!("/admin/api/roles/{role}/members/{user}"),
                Some(&admin),
                None,
            )
            .await;
        assert_eq!(removed.status, StatusCode::NO_CONTENT);
    }
    let denied = app.get(notes_path, &token).await;
    assert_eq!(
        (denied.status, denied.code()),
        (StatusCode::FORBIDDEN, "PERMISSION_DENIED")
    );
    let back = app
        .call(
            Method::PUT,
            &format!("/admin/api/roles/{role}/members/{user}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(back.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get(notes_path, &token).await.status, StatusCode::OK);
    let tokens = app
        .get(&format!("/admin/api/tokens?userId={user}"), &admin)
        .await;
    let id = tokens.data()[0]["id"].as_str().unwrap().to_owned();
    let revoke = app.delete(&format!("/admin/api/tokens/{id}"), &admin).await;
    assert_eq!(revoke.status, StatusCode::NO_CONTENT);
    let revoked = app.get(notes_path, &token).await;
    assert_eq!(
        (revoked.status, revoked.code()),
        (StatusCode::UNAUTHORIZED, "AUTHENTICATION_REQUIRED")
    );
    assert_eq!(app.get(notes_path, &session).await.status, StatusCode::OK);
    let logout = app
        .call(Method::POST, "/api/auth/logout", Some(&session), None)
        .await;
    assert_eq!(logout.status, StatusCode::NO_CONTENT);
    let ended = app.get(notes_path, &session).await;
    assert_eq!(
        (ended.status, ended.code()),
        (StatusCode::UNAUTHORIZED, "SESSION_EXPIRED")
    );
    assert_eq!(
        app.call(Method::GET, notes_path, None, None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn other_instances_see_grant_and_exposure_changes() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET"]).await;
    let role = create_role(&app, &admin, "Peers").await;
    let (_, reader) = member(&app, &admin, "peer@example.com", &role).await;
    let peer = app.spawn_peer().await;
    let status_on_peer = || async {
        app.client
            .get(format!("{peer}/api/data/app/notes"))
            .bearer_auth(&reader)
            .send()
            .await
            .unwrap()
            .status()
    };
    // The peer caches the catalog on its first read.
    assert_eq!(status_on_peer().await, StatusCode::FORBIDDEN);
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let mut status = StatusCode::FORBIDDEN;
    for _ in 0..100 {
        status = status_on_peer().await;
        if status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, StatusCode::OK, "the peer kept its stale catalog");
    expose(&app, &admin, &resource, &[]).await;
    for _ in 0..100 {
        status = status_on_peer().await;
        if status == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn rows_naming_no_column_take_the_defaults() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "stamps",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "at", "dataType": "timestamptz", "nullable": false, "default": "now()" },
        ]),
    )
    .await;
    expose(&app, &admin, &resource, &["POST"]).await;
    let one = app
        .post("/api/data/app/stamps", &admin, json!({ "data": {} }))
        .await;
    assert_eq!(one.status, StatusCode::CREATED, "{:?}", one.body);
    assert_eq!(one.data()["id"], 1);
    let many = app
        .post("/api/data/app/stamps", &admin, json!({ "data": [{}, {}] }))
        .await;
    assert_eq!(many.status, StatusCode::CREATED, "{:?}", many.body);
    assert_eq!(ids(&many), vec![2, 3]);
    assert!(many.data()[0]["at"].is_string());
}

#[tokio::test]
async fn a_column_shows_only_on_rows_a_grant_covering_it_reaches() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;
    let own = create_role(&app, &admin, "Own").await;
    let titles = create_role(&app, &admin, "Titles").await;
    // Own rows with every column; everyone's rows with id and title only.
    grant(
        &app,
        &admin,
        &own,
        &resource,
        "read",
        json!({ "owner_id": { "eq": "$USER.id" } }),
        Value::Null,
    )
    .await;
    grant(
        &app,
        &admin,
        &titles,
        &resource,
        "read",
        Value::Null,
        json!(["id", "title"]),
    )
    .await;
    let user = app
        .create_user(
            &admin,
            "cells@example.com",
            "member-password-1",
            Some(vec![own, titles]),
        )
        .await;
    let session = app.login("cells@example.com", "member-password-1").await;
    let someone = uuid::Uuid::now_v7().to_string();
    let rows = json!({ "data": [
        { "owner_id": user, "title": "mine", "secret": "my secret" },
        { "owner_id": someone, "title": "theirs", "secret": "their secret" } ] });
    assert_eq!(
        app.post("/api/data/app/notes", &admin, rows).await.status,
        StatusCode::CREATED
    );
    let list = app.get("/api/data/app/notes?sort=id", &session).await;
    assert_eq!(list.status, StatusCode::OK, "{:?}", list.body);
    assert_eq!(list.data()[0]["secret"], "my secret");
    assert_eq!(list.data()[1]["title"], "theirs");
    assert_eq!(list.data()[1]["secret"], Value::Null);
    assert_eq!(list.data()[1]["owner_id"], Value::Null);
    assert!(!list.body.to_string().contains("their secret"));
    // Filtering on a hidden value finds nothing: it compares as null there.
    let probe = encode(&json!({ "secret": { "eq": "their secret" } }).to_string());
    let probed = app
        .get(&format!("/api/data/app/notes?filter={probe}"), &session)
        .await;
    assert_eq!(probed.data(), &json!([]), "{:?}", probed.body);
    let hidden = encode(&json!({ "secret": { "isNull": true } }).to_string());
    let nulls = app
        .get(&format!("/api/data/app/notes?filter={hidden}"), &session)
        .await;
    assert_eq!(nulls.data().as_array().unwrap().len(), 1);
    assert_eq!(nulls.data()[0]["title"], "theirs");
}

/// Rows are read in binary and written as JSON by the server: every type
/// answers the JSON PostgreSQL's own `to_json` gives for the same rows.
#[tokio::test]
async fn rows_answer_the_json_postgres_writes_for_every_type() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.db.sql("CREATE SCHEMA kinds").await;
    app.db
        .sql(
            "CREATE TABLE kinds.every (id integer PRIMARY KEY, s smallint, b bigint, \
             flag boolean, t text, v varchar(10), c char(3), u uuid, d date, ts timestamp, tz timestamptz, \
             n numeric, r real, f double precision, j json, jb jsonb, a integer[], iv interval, m numeric(12, 4))",
        )
        .await;
    app.db
        .sql(
            "INSERT INTO kinds.every VALUES \
             (1, -32768, 9223372036854775807, true, E'quote \" back \\\\ nl \\n tab \\t bell \\u0007 é ✓', 'ten chars!', 'ab', \
              'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '2024-01-01 00:06:00.5', '1999-12-31 23:59:59.999999+00', \
              12.50, 1.5, 1e20, '{\"k\": [1, null]}', '{\"k\": [1, null]}', '{1,NULL,3}', '1 day 02:00', 0.0001), \
             (2, NULL, NULL, false, '', NULL, NULL, NULL, 'infinity', '-infinity', 'infinity', 'NaN', 'Infinity', -0.25, 'null', '\"s\"', '{}', NULL, -12345678.5), \
             (3, 0, 0, NULL, NULL, NULL, NULL, NULL, '0045-03-15', '2000-01-01', '1970-01-01 00:00:00.000001+00', -7, NULL, NULL, NULL, NULL, NULL, NULL, 0), \
             (4, 1, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 100000000000000000000.000000000000000000001, NULL, NULL, NULL, NULL, NULL, NULL, 10000), \
             (5, 1, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL, -0.5), \
             (6, 1, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0.000012300, NULL, NULL, NULL, NULL, NULL, NULL, 99999999.9999) \
             RETURNING 'ok'",
        )
        .await;
    let registered = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "kinds", "table": "every" } }),
        )
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    let resource = registered.data()["id"].as_str().unwrap().to_owned();
    expose(&app, &admin, &resource, &["GET"]).await;
    let expected: Value = serde_json::from_str(
        &app.db
            .sql(
                "SELECT (SELECT json_agg(e ORDER BY id) FROM kinds.every e)::text \
                 FROM (SELECT set_config('TimeZone', 'UTC', false)) AS utc",
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let listed = app.get("/api/data/kinds/every?sort=id", &admin).await;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.body);
    assert_eq!(listed.data(), &expected);
    let one = app.get("/api/data/kinds/every/1", &admin).await;
    assert_eq!(one.data(), &expected[0]);
}

/// Reads reuse their connections between requests: one the database has
/// ended (here every session that last ran the read) is replaced without the
/// caller noticing, and an empty answer is an
/// empty list (checked against the shared state, not taken for stale).
#[tokio::test]
async fn reads_survive_the_database_ending_their_connections() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "tallies",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true },
            { "name": "n", "dataType": "integer" },
        ]),
    )
    .await;
    expose(&app, &admin, &resource, &["GET"]).await;
    let role = create_role(&app, &admin, "Counters").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, reader) = member(&app, &admin, "counter@example.com", &role).await;

    for _ in 0..3 {
        let empty = app.get("/api/data/app/tallies", &reader).await;
        assert_eq!(empty.status, StatusCode::OK, "{:?}", empty.body);
        assert_eq!(empty.body["data"], json!([]));
    }
    app.db
        .sql("INSERT INTO app.tallies VALUES (1, 10), (2, 20) RETURNING 'x'")
        .await;
    // Behind a pooler, the server connections the pooler keeps (a read's
    // among them) are all idle between requests.
    let read = match app.pooler {
        Some(_) => "state = 'idle'",
        None => "query LIKE '%\"tallies\"%'",
    };
    for round in 0..3 {
        let ended = app
            .db
            .sql(&format!(
                "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() AND {read}"
            ))
            .await;
        assert_ne!(
            ended.as_deref(),
            Some("0"),
            "round {round}: a read's connection was kept"
        );
        let listed = app.get("/api/data/app/tallies?sort=id", &reader).await;
        assert_eq!(
            listed.status,
            StatusCode::OK,
            "round {round}: {:?}",
            listed.body
        );
        assert_eq!(ids(&listed), vec![1, 2], "round {round}");
    }
}

#[tokio::test]
async fn connections_plan_their_statements_as_configured() {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    use store_pg::{PlanCacheMode, PoolOptions};
    let app = spawn_app().await;
    for (mode, shown) in [
        (PoolOptions::default().plan_cache_mode, "force_generic_plan"),
        (PlanCacheMode::Auto, "auto"),
    ] {
        let options = PoolOptions {
            max_connections: 1,
            plan_cache_mode: mode,
            ..PoolOptions::default()
        };
        let db = store_pg::connect(&app.db.url, options).await.unwrap();
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SHOW plan_cache_mode",
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.try_get_by_index::<String>(0).unwrap(), shown);
        db.close().await.unwrap();
    }
}

/// Whether `text` has whitespace outside its JSON strings.
fn spaced(text: &str) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    text.chars().any(|c| {
        let outside = !in_string;
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            _ => {}
        }
        outside && c.is_whitespace()
    })
}

#[tokio::test]
async fn data_answers_are_compact_json() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    items(&app, &admin).await;
    let raw = |method: Method, path: &'static str, body: Option<Value>| {
        let mut request = app
            .client
            .request(method, format!("{}{path}", app.address))
            .bearer_auth(&admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let batch = json!({ "data": [{ "id": 5, "name": "elder berry" }, { "id": 6, "name": "fig" }] });
    for (method, path, body) in [
        (Method::GET, "/api/data/app/items", None),
        (Method::GET, "/api/data/app/items?count=exact", None),
        (
            Method::GET,
            "/api/data/app/items?count=exact&offset=10",
            None,
        ),
        (Method::GET, "/api/data/app/items/1", None),
        (Method::POST, "/api/data/app/items", Some(batch)),
        (
            Method::PATCH,
            "/api/data/app/items/6",
            Some(json!({ "data": { "qty": 2 } })),
        ),
    ] {
        let text = raw(method.clone(), path, body).await;
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        assert!(!spaced(&text), "{method} {path}: {text}");
    }
    assert!(spaced("{\"a\" : 1}") && !spaced("{\"a\":\" \\\" x\"}"));
}
