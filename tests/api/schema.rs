//! Schema administration: safe table definitions, preview, resources.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

/// Everything a failed create could leave behind: schemas, relations,
/// constraints, resources and schema audit entries.
const CATALOG: &str = "SELECT md5(string_agg(x, ',' ORDER BY x)) FROM ( \
    SELECT 'n:' || nspname FROM pg_namespace \
    UNION ALL SELECT 'c:' || c.oid::regclass::text || ':' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') \
    UNION ALL SELECT 'k:' || conname FROM pg_constraint \
    UNION ALL SELECT 'r:' || id::text FROM svc.resources \
    UNION ALL SELECT 'a:' || id::text FROM svc.audit_log WHERE action LIKE 'schema.%') t(x)";

fn rich() -> Value {
    json!({ "name": "orders", "columns": [
        { "name": "id", "dataType": "uuid", "primaryKey": true, "default": "gen_random_uuid()" },
        { "name": "number", "dataType": "bigint", "identity": "ALWAYS" },
        { "name": "title", "dataType": "text", "nullable": false },
        { "name": "amount", "dataType": "numeric(10,2)", "check": "amount >= 0", "checkMessage": "Amount must not be negative" },
        { "name": "customer_id", "dataType": "uuid", "foreignKey": { "targetSchema": "public", "targetTable": "customers", "targetColumn": "id", "onDelete": "RESTRICT" } }
    ] })
}

async fn customers(app: &TestApp, admin: &str) {
    let created = app
        .post("/admin/api/schema/public/tables", admin, json!({ "data": { "name": "customers", "columns": [
            { "name": "id", "dataType": "uuid", "primaryKey": true, "default": "gen_random_uuid()" },
            { "name": "email", "dataType": "text" } ] } }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
}

#[tokio::test]
async fn the_rich_definition_is_previewed_created_listed_extended_and_dropped() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    customers(&app, &admin).await;
    let before = app.db.sql(CATALOG).await;
    let preview = app
        .post(
            "/admin/api/schema/public/tables/preview",
            &admin,
            json!({ "data": rich() }),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{:?}", preview.body);
    let sql = preview.data()["sql"].as_str().unwrap().to_owned();
    assert!(sql.contains("CREATE TABLE \"public\".\"orders\""), "{sql}");
    assert_eq!(app.db.sql(CATALOG).await, before, "preview changes nothing");

    let created = app
        .post(
            "/admin/api/schema/public/tables",
            &admin,
            json!({ "data": rich() }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.data()["name"], "orders");
    assert_eq!(created.data()["schema"], "public");
    let resource_id = created.data()["resourceId"].as_str().unwrap().to_owned();
    let audit = app
        .get("/admin/api/audit?action=schema.table_create", &admin)
        .await;
    let ran = audit
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["details"]["table"] == "orders")
        .unwrap();
    assert_eq!(
        ran["details"]["sql"],
        sql.as_str(),
        "preview shows exactly what create ran"
    );

    let again = app
        .post(
            "/admin/api/schema/public/tables",
            &admin,
            json!({ "data": rich() }),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);

    let tables = app.get("/admin/api/schema/public/tables", &admin).await;
    let orders = tables
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "orders")
        .unwrap()
        .clone();
    assert_eq!(orders["resourceId"], resource_id.as_str());
    let col = |name: &str| {
        orders["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(col("id")["primaryKey"], true);
    assert_eq!(col("id")["default"], "gen_random_uuid()");
    assert_eq!(col("number")["identity"], "ALWAYS");
    assert_eq!(col("title")["nullable"], false);
    assert_eq!(col("amount")["dataType"], "numeric(10,2)");
    assert_eq!(col("amount")["checkMessage"], "Amount must not be negative");
    assert_eq!(col("customer_id")["foreignKey"]["targetTable"], "customers");
    assert_eq!(col("customer_id")["foreignKey"]["onDelete"], "RESTRICT");

    let resource = app
        .get(&format!("/admin/api/resources/{resource_id}"), &admin)
        .await;
    assert_eq!(
        resource.data()["exposedMethods"],
        json!([]),
        "a new table is hidden"
    );

    let added = app
        .post("/admin/api/schema/public/tables/orders/columns", &admin, json!({ "data": { "name": "status", "dataType": "text", "default": "'draft'", "check": "status IN ('draft', 'paid') AND amount >= 0" } }))
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{:?}", added.body);
    assert_eq!(added.data()["resourceId"], resource_id.as_str());
    let bad_column = app
        .post(
            "/admin/api/schema/public/tables/orders/columns",
            &admin,
            json!({ "data": { "name": "x", "dataType": "text", "check": "nope > 1" } }),
        )
        .await;
    assert_eq!(bad_column.body["errors"][0]["field"], "check");
    let missing = app
        .post(
            "/admin/api/schema/public/tables/nope/columns",
            &admin,
            json!({ "data": { "name": "x", "dataType": "text" } }),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // A referenced table cannot go first.
    assert_eq!(
        app.delete("/admin/api/schema/public/tables/customers", &admin)
            .await
            .status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.delete("/admin/api/schema/public/tables/orders", &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&format!("/admin/api/resources/{resource_id}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete("/admin/api/schema/public/tables/orders", &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn resources_are_exposed_and_registered() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    customers(&app, &admin).await;
    let list = app.get("/admin/api/resources", &admin).await;
    let id = list.data()[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list.data()[0]["table"], "customers");
    let exposed = app
        .patch(
            &format!("/admin/api/resources/{id}"),
            &admin,
            json!({ "data": { "exposedMethods": ["PATCH", "GET", "get"] } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK);
    assert_eq!(exposed.data()["exposedMethods"], json!(["GET", "PATCH"]));
    let bad = app
        .patch(
            &format!("/admin/api/resources/{id}"),
            &admin,
            json!({ "data": { "exposedMethods": ["PUT"] } }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["errors"][0]["field"], "exposedMethods[0]");

    app.db
        .sql("CREATE TABLE public.legacy (id int PRIMARY KEY)")
        .await;
    let registered = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "public", "table": "legacy" } }),
        )
        .await;
    assert_eq!(registered.status, StatusCode::CREATED);
    assert_eq!(registered.data()["exposedMethods"], json!([]));
    let twice = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "public", "table": "legacy" } }),
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    let missing = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "public", "table": "ghost" } }),
        )
        .await;
    assert_eq!(missing.body["errors"][0]["field"], "table");
    let reserved = app
        .post(
            "/admin/api/resources",
            &admin,
            json!({ "data": { "schema": "svc", "table": "users" } }),
        )
        .await;
    assert_eq!(reserved.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn non_administrators_cannot_touch_the_schema() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "plain@example.com", "password-1", None)
        .await;
    let user = app.login("plain@example.com", "password-1").await;
    let answer = app
        .post(
            "/admin/api/schema/public/tables",
            &user,
            json!({ "data": rich() }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.get("/admin/api/resources", &user).await.status,
        StatusCode::FORBIDDEN
    );
}

fn col(extra: Value) -> Value {
    let mut c = json!({ "name": "c", "dataType": "text" });
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    c
}

#[tokio::test]
async fn hostile_definitions_are_refused_and_leave_nothing_behind() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let table = |columns: Value| json!({ "name": "evil", "columns": columns });
    let one = |c: Value| table(json!([{ "name": "id", "dataType": "int", "primaryKey": true }, c]));
    let corpus: Vec<(&str, Value)> = vec![
        (
            "public",
            one(col(json!({ "default": "'x'; DROP TABLE svc.users" }))),
        ),
        ("public", one(col(json!({ "default": "'x' -- comment" })))),
        (
            "public",
            one(col(json!({ "default": "'x' /* comment */" }))),
        ),
        ("public", one(col(json!({ "default": "$$x$$" })))),
        ("public", one(col(json!({ "default": "$tag$x$tag$" })))),
        (
            "public",
            one(col(
                json!({ "default": "(SELECT password_hash FROM svc.users LIMIT 1)" }),
            )),
        ),
        (
            "public",
            one(col(
                json!({ "check": "c IN (SELECT email FROM svc.users)" }),
            )),
        ),
        ("public", one(col(json!({ "check": "EXISTS (SELECT 1)" })))),
        ("public", one(col(json!({ "default": "pg_sleep(10)" })))),
        (
            "public",
            one(col(json!({ "check": "pg_sleep(10) IS NULL" }))),
        ),
        (
            "public",
            one(col(json!({ "default": "pg_read_file('/etc/passwd')" }))),
        ),
        (
            "public",
            one(col(
                json!({ "default": "pg_catalog.pg_read_file('/etc/passwd')" }),
            )),
        ),
        (
            "public",
            one(col(
                json!({ "default": "current_setting('data_directory')" }),
            )),
        ),
        (
            "public",
            one(col(json!({ "default": "lo_import('/etc/passwd')" }))),
        ),
        (
            "public",
            one(col(json!({ "default": "set_config('x', 'y', false)" }))),
        ),
        ("public", one(col(json!({ "default": "\"lower\"('X')" })))),
        ("public", one(col(json!({ "default": "count(*)" })))),
        ("public", one(col(json!({ "default": "now() OVER ()" })))),
        ("public", one(col(json!({ "default": "1 1" })))),
        ("public", one(col(json!({ "default": "" })))),
        (
            "public",
            one(col(json!({ "check": "other_table.col > 0" }))),
        ),
        ("public", one(col(json!({ "check": "missing > 0" })))),
        ("public", one(col(json!({ "default": "c" })))),
        (
            "public",
            one(col(json!({ "dataType": "text; DROP TABLE svc.users" }))),
        ),
        ("public", one(col(json!({ "dataType": "text -- x" })))),
        ("public", one(col(json!({ "dataType": "no_such_type" })))),
        ("public", one(col(json!({ "dataType": "int int" })))),
        ("public", one(col(json!({ "dataType": "" })))),
        (
            "public",
            one(col(json!({ "name": "c\"; DROP TABLE svc.users; --" }))),
        ),
        ("public", one(col(json!({ "name": "has space" })))),
        ("public", one(col(json!({ "name": "ünïcode" })))),
        ("public", one(col(json!({ "name": "x".repeat(64) })))),
        ("public", one(col(json!({ "name": "" })))),
        ("public", one(col(json!({ "name": "9lives" })))),
        ("public", one(col(json!({ "name": "a\u{0}b" })))),
        (
            "public",
            json!({ "name": "evil\"; DROP TABLE svc.users; --", "columns": [{ "name": "id", "dataType": "int" }] }),
        ),
        (
            "public",
            json!({ "name": "e".repeat(64), "columns": [{ "name": "id", "dataType": "int" }] }),
        ),
        ("public", json!({ "name": "evil", "columns": [] })),
        ("svc", table(json!([{ "name": "id", "dataType": "int" }]))),
        (
            "pg_catalog",
            table(json!([{ "name": "id", "dataType": "int" }])),
        ),
        (
            "information_schema",
            table(json!([{ "name": "id", "dataType": "int" }])),
        ),
        (
            "public",
            table(json!([{ "name": "a", "dataType": "int" }, { "name": "a", "dataType": "int" }])),
        ),
        (
            "public",
            table(
                json!([{ "name": "a", "dataType": "int", "primaryKey": true }, { "name": "b", "dataType": "int", "primaryKey": true }]),
            ),
        ),
        ("public", one(col(json!({ "identity": "ALWAYS" })))),
        (
            "public",
            one(col(json!({ "dataType": "int", "identity": "BY DEFAULT" }))),
        ),
        (
            "public",
            one(col(
                json!({ "dataType": "int", "identity": "ALWAYS", "default": "1" }),
            )),
        ),
        (
            "public",
            one(col(
                json!({ "foreignKey": { "targetTable": "missing", "targetColumn": "id" } }),
            )),
        ),
        (
            "public",
            one(col(
                json!({ "foreignKey": { "targetSchema": "svc", "targetTable": "users", "targetColumn": "email" } }),
            )),
        ),
        (
            "public",
            one(col(
                json!({ "foreignKey": { "targetTable": "evil", "targetColumn": "id", "onDelete": "DROP" } }),
            )),
        ),
        ("public", one(col(json!({ "checkMessage": "no check" })))),
        (
            "public",
            one(col(
                json!({ "dataType": "int", "default": "'not a number'" }),
            )),
        ),
        (
            "public",
            one(col(json!({ "check": "c", "dataType": "int" }))),
        ),
    ];
    assert!(corpus.len() >= 40);
    let before = app.db.sql(CATALOG).await;
    for (schema, definition) in &corpus {
        for route in ["tables", "tables/preview"] {
            let answer = app
                .post(
                    &format!("/admin/api/schema/{schema}/{route}"),
                    &admin,
                    json!({ "data": definition }),
                )
                .await;
            assert!(
                answer.status == StatusCode::BAD_REQUEST || answer.status == StatusCode::CONFLICT,
                "{route} {schema} {definition}: {} {:?}",
                answer.status,
                answer.body
            );
            assert_eq!(answer.code(), "INVALID_PAYLOAD", "{definition}");
            let text = answer.body.to_string();
            assert!(
                !text.contains("CREATE TABLE") && !text.contains("SELECT"),
                "no SQL in errors: {text}"
            );
        }
    }
    assert_eq!(
        app.db.sql(CATALOG).await,
        before,
        "the catalog is exactly as it was"
    );
    assert_eq!(
        app.get("/admin/api/users", &admin).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn refusals_name_the_column_and_attribute() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    for (definition, field) in [
        (
            json!({ "name": "t", "columns": [{ "name": "a", "dataType": "int" }, { "name": "b", "dataType": "int", "check": "pg_sleep(1) IS NULL" }] }),
            "columns[1].check",
        ),
        (
            json!({ "name": "t", "columns": [{ "name": "a", "dataType": "nope_type" }] }),
            "columns[0].dataType",
        ),
        (
            json!({ "name": "t", "columns": [{ "name": "a", "dataType": "text", "identity": "ALWAYS" }] }),
            "columns[0].identity",
        ),
        (
            json!({ "name": "t", "columns": [{ "name": "a", "dataType": "int", "foreignKey": { "targetTable": "nope", "targetColumn": "id" } }] }),
            "columns[0].foreignKey",
        ),
        (
            json!({ "name": "t", "columns": [{ "name": "a", "dataType": 5 }] }),
            "columns[0].dataType",
        ),
    ] {
        let answer = app
            .post(
                "/admin/api/schema/public/tables",
                &admin,
                json!({ "data": definition }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{definition}");
        assert_eq!(answer.body["errors"][0]["field"], field, "{definition}");
    }
}

#[tokio::test]
async fn the_first_tables_of_a_new_schema_can_be_created_at_once() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let create = |schema: String, name: String| {
        let app = &app;
        let admin = admin.clone();
        async move {
            app.post(
                &format!("/admin/api/schema/{schema}/tables"),
                &admin,
                json!({ "data": { "name": name, "columns": [{ "name": "id", "dataType": "bigint", "primaryKey": true }] } }),
            )
            .await
        }
    };
    for round in 0..3 {
        let schema = format!("fresh{round}");
        let answers =
            futures_util::future::join_all((0..8).map(|i| create(schema.clone(), format!("t{i}"))))
                .await;
        for (i, answer) in answers.iter().enumerate() {
            assert_eq!(
                answer.status,
                StatusCode::CREATED,
                "round {round} t{i}: {:?}",
                answer.body
            );
        }
        // The same name at once: one is created, the others are told it exists.
        let same = futures_util::future::join_all(
            (0..4).map(|_| create(schema.clone(), "twice".to_owned())),
        )
        .await;
        let mut statuses: Vec<u16> = same.iter().map(|a| a.status.as_u16()).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, [201, 409, 409, 409], "round {round}");
    }
}
