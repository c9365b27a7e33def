//! Database functions over the Data API (API.md 18): registration with its
//! refusals, exposure, the invoke grant, calls by POST and GET with typed
//! arguments, the caller's settings inside the function, read-only calls of
//! stable functions, and the error mapping. Each refusal follows a control
//! that passes.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

/// Runs each statement in the app's database.
pub(crate) async fn sql(app: &TestApp, statements: &[&str]) {
    for statement in statements {
        app.db.sql(statement).await;
    }
}

/// Registers `shop.<name>` and exposes it for `methods`; answers its id.
pub(crate) async fn registered(app: &TestApp, admin: &str, name: &str, methods: &[&str]) -> String {
    let created = app
        .post(
            "/admin/api/resources",
            admin,
            json!({ "data": { "schema": "shop", "function": name } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.data()["id"].as_str().unwrap().to_owned();
    let exposed = app
        .patch(
            &format!("/admin/api/resources/{id}"),
            admin,
            json!({ "data": { "exposedMethods": methods } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK, "{:?}", exposed.body);
    id
}

/// A person in a role of their own, that role's id and their session.
pub(crate) async fn shopper(app: &TestApp, admin: &str, email: &str) -> (String, String, String) {
    let role = app
        .post(
            "/admin/api/roles",
            admin,
            json!({ "data": { "name": format!("role {email}"), "apiAccess": true } }),
        )
        .await;
    assert_eq!(role.status, StatusCode::CREATED, "{:?}", role.body);
    let role_id = role.data()["id"].as_str().unwrap().to_owned();
    let user_id = app
        .create_user(admin, email, "password-1", Some(vec![role_id.clone()]))
        .await;
    let session = app.login(email, "password-1").await;
    (user_id, role_id, session)
}

pub(crate) async fn invoke_grant(app: &TestApp, admin: &str, role_id: &str, function_id: &str) {
    let granted = app
        .post(
            "/admin/api/grants",
            admin,
            json!({ "data": { "roleId": role_id, "resourceId": function_id, "action": "invoke" } }),
        )
        .await;
    assert_eq!(granted.status, StatusCode::CREATED, "{:?}", granted.body);
}

pub(crate) async fn call(
    app: &TestApp,
    session: &str,
    function: &str,
    data: Value,
) -> testkit::Answer {
    app.post(
        &format!("/api/rpc/shop/{function}"),
        session,
        json!({ "data": data }),
    )
    .await
}

#[tokio::test]
async fn a_function_registers_with_its_description_and_the_rest_is_refused() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(
        &app,
        &[
            "CREATE SCHEMA shop",
            "CREATE FUNCTION shop.add(a integer, b integer DEFAULT 10) RETURNS integer \
             LANGUAGE sql IMMUTABLE AS 'SELECT a + b'",
            "CREATE FUNCTION shop.twice(n integer) RETURNS integer LANGUAGE sql AS 'SELECT n * 2'",
            "CREATE FUNCTION shop.twice(n text) RETURNS text LANGUAGE sql AS 'SELECT n || n'",
            "CREATE PROCEDURE shop.restock() LANGUAGE sql AS 'SELECT 1'",
            "CREATE FUNCTION shop.anonymous(integer) RETURNS integer LANGUAGE sql AS 'SELECT $1'",
            "CREATE AGGREGATE shop.total(integer) (SFUNC = int4pl, STYPE = integer)",
        ],
    )
    .await;
    let register = |function: &str| {
        let body = json!({ "data": { "schema": "shop", "function": function } });
        app.post("/admin/api/resources", &admin, body)
    };
    // Control: one function with named arguments.
    let created = register("add").await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let data = created.data();
    assert_eq!(data["kind"], "function");
    assert_eq!(data["schema"], "shop");
    assert_eq!(data["function"], "add");
    assert_eq!(
        data["arguments"],
        json!([
            { "name": "a", "type": "integer", "hasDefault": false },
            { "name": "b", "type": "integer", "hasDefault": true }
        ])
    );
    assert_eq!(data["returns"], json!({ "type": "integer", "set": false }));
    assert_eq!(data["volatility"], "immutable");
    assert_eq!(data["exposedMethods"], json!([]));
    let id = data["id"].as_str().unwrap().to_owned();
    let again = register("add").await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{:?}", again.body);

    for (name, words) in [
        ("twice", "overloads"),
        ("restock", "procedure"),
        ("anonymous", "without a name"),
        ("total", "aggregate"),
    ] {
        let refused = register(name).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{name}: {:?}",
            refused.body
        );
        assert_eq!(refused.code(), "INVALID_PAYLOAD");
        assert_eq!(refused.body["errors"][0]["field"], "function");
        assert!(
            refused.body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains(words),
            "{name}: {:?}",
            refused.body
        );
    }
    let reserved = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "svc", "function": "cache_current" } }),
        )
        .await;
    assert_eq!(
        reserved.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        reserved.body
    );
    assert_eq!(reserved.body["errors"][0]["field"], "schema");
    assert_eq!(register("missing").await.status, StatusCode::NOT_FOUND);

    // Listed beside the tables, each with its kind; GET of one answers it.
    let listed = app.get("/admin/api/resources", &admin).await;
    let kinds: Vec<&str> = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"table") && kinds.contains(&"function"),
        "{kinds:?}"
    );
    let one = app.get(&format!("/admin/api/resources/{id}"), &admin).await;
    assert_eq!(one.data()["function"], "add");

    // GET exposure only for a function that reads only.
    sql(
        &app,
        &["CREATE FUNCTION shop.bump() RETURNS integer LANGUAGE sql VOLATILE AS 'SELECT 1'"],
    )
    .await;
    let volatile = register("bump").await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = app
        .patch(
            &format!("/admin/api/resources/{volatile}"),
            &admin,
            json!({ "data": { "exposedMethods": ["POST", "GET"] } }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.body["errors"][0]["field"], "exposedMethods[1]");
    let patch = app
        .patch(
            &format!("/admin/api/resources/{volatile}"),
            &admin,
            json!({ "data": { "exposedMethods": ["PATCH"] } }),
        )
        .await;
    assert_eq!(patch.status, StatusCode::BAD_REQUEST, "{:?}", patch.body);
    let read_only = app
        .patch(
            &format!("/admin/api/resources/{id}"),
            &admin,
            json!({ "data": { "exposedMethods": ["get", "POST"] } }),
        )
        .await;
    assert_eq!(read_only.data()["exposedMethods"], json!(["GET", "POST"]));

    // A function's grant invokes, with no filter or columns; a table's does not.
    let (_, role_id, _) = shopper(&app, &admin, "ann@example.com").await;
    let grant = |body: Value| app.post("/admin/api/grants", &admin, json!({ "data": body }));
    for refused in [
        json!({ "roleId": role_id, "resourceId": id, "action": "read" }),
        json!({ "roleId": role_id, "resourceId": id, "action": "invoke", "filter": { "a": { "eq": 1 } } }),
        json!({ "roleId": role_id, "resourceId": id, "action": "invoke", "columns": ["a"] }),
    ] {
        let answer = grant(refused.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{refused}: {:?}",
            answer.body
        );
    }
    let table = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "table")
        .unwrap()["id"]
        .clone();
    let on_table =
        grant(json!({ "roleId": role_id, "resourceId": table, "action": "invoke" })).await;
    assert_eq!(
        on_table.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        on_table.body
    );
    let granted = grant(json!({ "roleId": role_id, "resourceId": id, "action": "invoke" })).await;
    assert_eq!(granted.status, StatusCode::CREATED, "{:?}", granted.body);
    assert_eq!(granted.data()["resourceId"], json!(id));
}

#[tokio::test]
async fn a_call_needs_exposure_and_the_invoke_grant_and_answers_each_kind_of_result() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(
        &app,
        &[
            "CREATE SCHEMA shop",
            "CREATE TABLE shop.items (id integer PRIMARY KEY, name text NOT NULL)",
            "INSERT INTO shop.items VALUES (1, 'pen'), (2, 'ink')",
            "CREATE FUNCTION shop.add(a integer, b integer DEFAULT 10) RETURNS integer \
             LANGUAGE sql IMMUTABLE AS 'SELECT a + b'",
            "CREATE FUNCTION shop.me() RETURNS jsonb LANGUAGE sql STABLE AS \
             $$ SELECT jsonb_build_object('user', current_setting('tessera.user_id', true), \
                'roles', current_setting('tessera.role_ids', true)::jsonb) $$",
            "CREATE FUNCTION shop.first_item() RETURNS shop.items LANGUAGE sql STABLE AS \
             'SELECT * FROM shop.items ORDER BY id LIMIT 1'",
            "CREATE FUNCTION shop.items_from(low integer) RETURNS SETOF shop.items LANGUAGE sql STABLE AS \
             'SELECT * FROM shop.items WHERE id >= low ORDER BY id'",
            // A result column may take any name, a short one too.
            "CREATE FUNCTION shop.names(tags text[]) RETURNS TABLE(name text, r integer) \
             LANGUAGE sql STABLE AS 'SELECT t, length(t) FROM unnest(tags) AS t'",
            "CREATE FUNCTION shop.restock(item integer) RETURNS void LANGUAGE sql VOLATILE AS \
             $$ UPDATE shop.items SET name = name || '+' WHERE id = item $$",
            "CREATE FUNCTION shop.sneaky() RETURNS integer LANGUAGE sql STABLE AS \
             $$ UPDATE shop.items SET name = 'x' RETURNING id $$",
        ],
    )
    .await;
    let add = registered(&app, &admin, "add", &[]).await;
    let (user_id, role_id, ann) = shopper(&app, &admin, "ann@example.com").await;
    let (_, _, bob) = shopper(&app, &admin, "bob@example.com").await;

    // Hidden, then not exposed for the method, then without a grant.
    assert_eq!(
        call(&app, &ann, "add", json!({ "a": 1 })).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&app, &ann, "nothing", json!({})).await.status,
        StatusCode::NOT_FOUND
    );
    app.patch(
        &format!("/admin/api/resources/{add}"),
        &admin,
        json!({ "data": { "exposedMethods": ["POST"] } }),
    )
    .await;
    let by_get = app.get("/api/rpc/shop/add?a=1", &ann).await;
    assert_eq!(
        by_get.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{:?}",
        by_get.body
    );
    let denied = call(&app, &ann, "add", json!({ "a": 1 })).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{:?}", denied.body);
    assert_eq!(denied.code(), "PERMISSION_DENIED");
    invoke_grant(&app, &admin, &role_id, &add).await;
    let sum = call(&app, &ann, "add", json!({ "a": 1 })).await;
    assert_eq!(sum.status, StatusCode::OK, "{:?}", sum.body);
    assert_eq!(sum.body, json!({ "data": 11 }));
    assert_eq!(
        call(&app, &ann, "add", json!({ "a": 1, "b": 2 }))
            .await
            .body,
        json!({ "data": 3 })
    );
    assert_eq!(
        call(&app, &bob, "add", json!({ "a": 1 })).await.status,
        StatusCode::FORBIDDEN,
        "a role without the grant"
    );
    // Arguments by name, typed.
    for (data, field) in [
        (json!({ "b": 2 }), "data.a"),
        (json!({ "a": 1, "c": 2 }), "data.c"),
        (json!({ "a": "one" }), "data.a"),
        (json!({ "a": 1, "b": [1] }), "data.b"),
    ] {
        let refused = call(&app, &ann, "add", data.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{data}: {:?}",
            refused.body
        );
        assert_eq!(refused.code(), "INVALID_PAYLOAD", "{data}");
        assert_eq!(refused.body["errors"][0]["field"], field, "{data}");
    }

    // The caller's id and roles inside the function; GET with JSON-decoded
    // query parameters for a function that reads only.
    for name in [
        "me",
        "first_item",
        "items_from",
        "names",
        "restock",
        "sneaky",
    ] {
        let methods: &[&str] = if name == "restock" {
            &["POST"]
        } else {
            &["GET", "POST"]
        };
        let id = registered(&app, &admin, name, methods).await;
        invoke_grant(&app, &admin, &role_id, &id).await;
    }
    let me = app.get("/api/rpc/shop/me", &ann).await;
    assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
    assert_eq!(me.data()["user"], json!(user_id));
    assert_eq!(me.data()["roles"], json!([role_id]));
    let row = app.get("/api/rpc/shop/first_item", &ann).await;
    assert_eq!(row.body, json!({ "data": { "id": 1, "name": "pen" } }));
    let set = app.get("/api/rpc/shop/items_from?low=2", &ann).await;
    assert_eq!(set.body, json!({ "data": [{ "id": 2, "name": "ink" }] }));
    let table = app
        .get("/api/rpc/shop/names?tags=[\"ab\",\"c\"]", &ann)
        .await;
    assert_eq!(
        table.body,
        json!({ "data": [{ "name": "ab", "r": 2 }, { "name": "c", "r": 1 }] })
    );
    let empty = app.get("/api/rpc/shop/items_from?low=9", &ann).await;
    assert_eq!(empty.body, json!({ "data": [] }));

    // A volatile call writes, answers null for void, and is audited; a
    // stable function that writes fails in its read-only transaction.
    let void = call(&app, &ann, "restock", json!({ "item": 1 })).await;
    assert_eq!(void.status, StatusCode::OK, "{:?}", void.body);
    assert_eq!(void.body, json!({ "data": null }));
    assert_eq!(
        app.db
            .sql("SELECT name FROM shop.items WHERE id = 1")
            .await
            .as_deref(),
        Some("pen+")
    );
    let audit = app.get("/admin/api/audit?action=data.rpc", &admin).await;
    assert_eq!(
        audit.data()[0]["details"]["function"],
        "restock",
        "{:?}",
        audit.body
    );
    assert_eq!(
        audit.data()[0]["actorId"],
        json!(user_id),
        "{:?}",
        audit.body
    );
    let sneaky = call(&app, &ann, "sneaky", json!({})).await;
    assert_eq!(sneaky.status, StatusCode::BAD_REQUEST, "{:?}", sneaky.body);
    assert_eq!(sneaky.code(), "FUNCTION_FAILED");
    assert_eq!(
        app.db
            .sql("SELECT name FROM shop.items WHERE id = 2")
            .await
            .as_deref(),
        Some("ink"),
        "nothing written by a stable function"
    );
}

#[tokio::test]
async fn a_functions_errors_keep_their_codes_and_name_no_sql() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(
        &app,
        &[
            "CREATE SCHEMA shop",
            "CREATE TABLE shop.stock (item text PRIMARY KEY, count integer NOT NULL CHECK (count >= 0))",
            "INSERT INTO shop.stock VALUES ('pen', 3)",
            "CREATE FUNCTION shop.take(want integer) RETURNS integer LANGUAGE plpgsql AS $$ \
             DECLARE have integer; BEGIN \
               IF want < 0 THEN RAISE EXCEPTION 'odd' USING HINT = 'not a code'; END IF; \
               SELECT count INTO have FROM shop.stock WHERE item = 'pen'; \
               IF want > have THEN \
                 RAISE EXCEPTION 'Only % left', have USING HINT = 'OUT_OF_STOCK'; \
               END IF; \
               IF want = 0 THEN RAISE EXCEPTION 'Take at least one'; END IF; \
               UPDATE shop.stock SET count = count - want WHERE item = 'pen'; \
               RETURN have - want; END $$",
            "CREATE FUNCTION shop.broken(n integer) RETURNS integer LANGUAGE plpgsql AS \
             $$ BEGIN RETURN 10 / n; END $$",
            "CREATE FUNCTION shop.add_item(item text, count integer) RETURNS void LANGUAGE sql AS \
             'INSERT INTO shop.stock VALUES (item, count)'",
            "CREATE FUNCTION shop.spin() RETURNS void LANGUAGE plpgsql AS \
             $$ BEGIN LOOP PERFORM 1; END LOOP; END $$",
        ],
    )
    .await;
    let (_, role_id, ann) = shopper(&app, &admin, "ann@example.com").await;
    for name in ["take", "broken", "add_item", "spin"] {
        let id = registered(&app, &admin, name, &["POST"]).await;
        invoke_grant(&app, &admin, &role_id, &id).await;
    }
    // Control: a call that succeeds and writes.
    assert_eq!(
        call(&app, &ann, "take", json!({ "want": 1 })).await.body,
        json!({ "data": 2 })
    );

    let raised = call(&app, &ann, "take", json!({ "want": 5 })).await;
    assert_eq!(raised.status, StatusCode::BAD_REQUEST, "{:?}", raised.body);
    assert_eq!(raised.code(), "OUT_OF_STOCK");
    assert_eq!(raised.body["errors"][0]["message"], "Only 2 left");
    for want in [0, -1] {
        let plain = call(&app, &ann, "take", json!({ "want": want })).await;
        assert_eq!(plain.code(), "FUNCTION_RAISED", "{:?}", plain.body);
    }
    assert_eq!(
        app.db
            .sql("SELECT count::text FROM shop.stock WHERE item = 'pen'")
            .await
            .as_deref(),
        Some("2"),
        "a refused call writes nothing"
    );

    assert_eq!(
        call(&app, &ann, "broken", json!({ "n": 2 })).await.body,
        json!({ "data": 5 })
    );
    let failed = call(&app, &ann, "broken", json!({ "n": 0 })).await;
    assert_eq!(failed.status, StatusCode::BAD_REQUEST, "{:?}", failed.body);
    assert_eq!(failed.code(), "FUNCTION_FAILED");
    let message = failed.body["errors"][0]["message"]
        .as_str()
        .unwrap()
        .to_lowercase();
    for internal in ["division", "plpgsql", "line", "shop.", "select", "return"] {
        assert!(!message.contains(internal), "{message}");
    }
    assert!(
        failed.body["errors"][0]
            .get("field")
            .is_none_or(Value::is_null),
        "{:?}",
        failed.body
    );

    for (data, status, code) in [
        (json!({ "item": "ink", "count": 1 }), StatusCode::OK, None),
        (
            json!({ "item": "ink", "count": 1 }),
            StatusCode::CONFLICT,
            Some("CONFLICT"),
        ),
        (
            json!({ "item": "cap", "count": -1 }),
            StatusCode::BAD_REQUEST,
            Some("CHECK_VIOLATION"),
        ),
        (
            json!({ "item": "cap", "count": null }),
            StatusCode::BAD_REQUEST,
            Some("NOT_NULL_VIOLATION"),
        ),
    ] {
        let answer = call(&app, &ann, "add_item", data.clone()).await;
        assert_eq!(answer.status, status, "{data}: {:?}", answer.body);
        if let Some(code) = code {
            assert_eq!(answer.code(), code, "{data}");
        }
    }

    // An endless function stops at the statement timeout, and the next
    // call on the same pool answers.
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.statement_timeout_ms": 300 } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    let started = std::time::Instant::now();
    let endless = call(&app, &ann, "spin", json!({})).await;
    assert_eq!(
        endless.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        endless.body
    );
    assert_eq!(endless.code(), "QUERY_TIMEOUT");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    for _ in 0..3 {
        assert_eq!(
            call(&app, &ann, "broken", json!({ "n": 5 })).await.body,
            json!({ "data": 2 })
        );
    }
}

#[tokio::test]
async fn a_function_replaced_in_place_or_its_grant_revoked_is_seen_by_the_next_call() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sql(
        &app,
        &[
            "CREATE SCHEMA shop",
            "CREATE FUNCTION shop.answer(n integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT n + 1 $$",
        ],
    )
    .await;
    let id = registered(&app, &admin, "answer", &["GET", "POST"]).await;
    let (_, role, session) = shopper(&app, &admin, "cached@example.com").await;
    invoke_grant(&app, &admin, &role, &id).await;
    let first = call(&app, &session, "answer", json!({ "n": 1 })).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    assert_eq!(first.data(), &json!(2));

    // Replaced in place (no version of Tessera's moves): a new argument name.
    sql(
        &app,
        &[
            "DROP FUNCTION shop.answer(integer)",
            "CREATE FUNCTION shop.answer(m integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT m * 10 $$",
        ],
    )
    .await;
    let renamed = call(&app, &session, "answer", json!({ "m": 2 })).await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.data(), &json!(20));
    let old_name = call(&app, &session, "answer", json!({ "n": 2 })).await;
    assert_eq!(
        old_name.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        old_name.body
    );
    sql(
        &app,
        &["CREATE OR REPLACE FUNCTION shop.answer(m integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT m * 100 $$"],
    )
    .await;
    let replaced = call(&app, &session, "answer", json!({ "m": 2 })).await;
    assert_eq!(replaced.data(), &json!(200), "{:?}", replaced.body);

    // A stable function that calls a writer writes nothing: the call's
    // transaction is read-only before the function runs, whatever the plan.
    sql(
        &app,
        &[
            "CREATE TABLE shop.log (x integer)",
            "CREATE FUNCTION shop.write_log() RETURNS void LANGUAGE sql VOLATILE AS \
             $$ INSERT INTO shop.log VALUES (1) $$",
            "CREATE FUNCTION shop.quiet() RETURNS text LANGUAGE plpgsql STABLE AS \
             $$ BEGIN PERFORM shop.write_log(); RETURN current_setting('tessera.user_id', true); END $$",
            "CREATE FUNCTION shop.who() RETURNS text LANGUAGE plpgsql STABLE AS \
             $$ BEGIN RETURN current_setting('tessera.user_id', true); END $$",
        ],
    )
    .await;
    for name in ["quiet", "who"] {
        let id = registered(&app, &admin, name, &["GET", "POST"]).await;
        invoke_grant(&app, &admin, &role, &id).await;
    }
    let who = app.get("/api/rpc/shop/who", &session).await;
    assert_eq!(who.status, StatusCode::OK, "{:?}", who.body);
    assert!(
        who.data().as_str().is_some_and(|id| id.len() == 36),
        "{:?}",
        who.body
    );
    let quiet = app.get("/api/rpc/shop/quiet", &session).await;
    assert_eq!(quiet.code(), "FUNCTION_FAILED", "{:?}", quiet.body);
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM shop.log")
            .await
            .as_deref(),
        Some("0")
    );

    // Replaced by a volatile function after it was exposed for GET: GET no
    // longer calls it, POST does.
    sql(
        &app,
        &[
            "CREATE OR REPLACE FUNCTION shop.who() RETURNS text LANGUAGE plpgsql VOLATILE AS \
           $$ BEGIN PERFORM shop.write_log(); RETURN 'wrote'; END $$",
        ],
    )
    .await;
    let get = app.get("/api/rpc/shop/who", &session).await;
    assert_eq!(get.status, StatusCode::METHOD_NOT_ALLOWED, "{:?}", get.body);
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM shop.log")
            .await
            .as_deref(),
        Some("0")
    );
    let post = call(&app, &session, "who", json!({})).await;
    assert_eq!(post.data(), &json!("wrote"), "{:?}", post.body);

    // The grant revoked: the next call is refused.
    let grants = app.get("/admin/api/grants", &admin).await;
    let grant = grants
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["resourceId"] == id.as_str() && g["roleId"] == role.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let revoked = app
        .delete(&format!("/admin/api/grants/{grant}"), &admin)
        .await;
    assert!(revoked.status.is_success(), "{:?}", revoked.body);
    let refused = call(&app, &session, "answer", json!({ "m": 2 })).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{:?}", refused.body);
}
