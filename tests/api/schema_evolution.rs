//! Tables that change after day one (API.md section 12): rename a table,
//! change and drop columns, indexes, and descriptions both ways.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::USERS_ROLE;

/// The catalog of application schemas and everything Tessera records about
/// it: what a refused change must leave as it was.
const CATALOG: &str = "SELECT md5(string_agg(x, ',' ORDER BY x)) FROM ( \
    SELECT 'c:' || c.oid::regclass::text || ':' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' \
    UNION ALL SELECT 'a:' || a.attrelid::regclass::text || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod) || a.attnotnull::text \
        || coalesce(pg_get_expr(d.adbin, d.adrelid), '') FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped \
    UNION ALL SELECT 'k:' || conname || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace \
    UNION ALL SELECT 'r:' || r::text FROM svc.resources r \
    UNION ALL SELECT 'g:' || g.id::text || coalesce(g.columns::text, '') FROM svc.grants g \
    UNION ALL SELECT 'd:' || v.slug || v.draft::text FROM svc.dataviews v \
    UNION ALL SELECT 'w:' || w.slug || w.draft::text || coalesce(w.published::text, '') FROM svc.workflows w \
    UNION ALL SELECT 'o:' || id::text || md5(t::text) FROM public.orders t \
    UNION ALL SELECT 'l:' || id::text FROM svc.audit_log WHERE action LIKE 'schema.%') t(x)";

/// Creates `public.orders` (and `public.customers` it references) with a few
/// rows, exposed for reads; answers the orders' resource id.
async fn orders(app: &TestApp, admin: &str) -> String {
    let customers = app
        .post(
            "/admin/api/schema/public/tables",
            admin,
            json!({ "data": { "name": "customers", "columns": [
                { "name": "id", "dataType": "bigint", "primaryKey": true },
                { "name": "email", "dataType": "text", "unique": true } ] } }),
        )
        .await;
    assert_eq!(
        customers.status,
        StatusCode::CREATED,
        "{:?}",
        customers.body
    );
    let created = app
        .post(
            "/admin/api/schema/public/tables",
            admin,
            json!({ "data": { "name": "orders", "columns": [
                { "name": "id", "dataType": "bigint", "primaryKey": true },
                { "name": "title", "dataType": "text" },
                { "name": "amount", "dataType": "text" },
                { "name": "state", "dataType": "text" },
                { "name": "note", "dataType": "text" },
                { "name": "customer_id", "dataType": "bigint", "foreignKey": { "targetTable": "customers", "targetColumn": "id" } } ] } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    app.db
        .sql("INSERT INTO public.customers VALUES (1, 'a@example.com')")
        .await;
    app.db
        .sql("INSERT INTO public.orders VALUES (1, 'one', '10', 'open', NULL, 1), (2, 'two', '20', 'open', 'x', NULL), (3, 'three', '30', 'done', NULL, NULL)")
        .await;
    let id = created.data()["resourceId"].as_str().unwrap().to_owned();
    let exposed = app
        .patch(
            &format!("/admin/api/resources/{id}"),
            admin,
            json!({ "data": { "exposedMethods": ["GET"] } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK, "{:?}", exposed.body);
    id
}

async fn column(app: &TestApp, admin: &str, table: &str, name: &str) -> Value {
    let tables = app.get("/admin/api/schema/public/tables", admin).await;
    tables
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == table)
        .and_then(|t| {
            t["columns"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
                .cloned()
        })
        .unwrap_or(Value::Null)
}

const ORDERS: &str = "/admin/api/schema/public/tables/orders";

#[tokio::test]
async fn columns_are_renamed_retyped_constrained_and_dropped_with_grants_following() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let grant = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "columns": ["id", "title", "note"] } }),
        )
        .await;
    assert_eq!(grant.status, StatusCode::CREATED, "{:?}", grant.body);
    let grant_id = grant.data()["id"].as_str().unwrap().to_owned();
    // The Data API reads the table before the change, so its catalog is cached.
    let before = app.get("/api/data/public/orders?sort=id", &admin).await;
    assert_eq!(before.data()[0]["title"], "one");

    let catalog = app.db.sql(CATALOG).await;
    let preview = app
        .post(
            &format!("{ORDERS}/columns/title/preview"),
            &admin,
            json!({ "data": { "name": "label", "nullable": false } }),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{:?}", preview.body);
    assert_eq!(
        preview.data()["sql"],
        "ALTER TABLE \"public\".\"orders\" RENAME COLUMN \"title\" TO \"label\";\n\
         ALTER TABLE \"public\".\"orders\" ALTER COLUMN \"label\" SET NOT NULL;"
    );
    assert_eq!(
        app.db.sql(CATALOG).await,
        catalog,
        "a preview changes nothing"
    );

    let renamed = app
        .patch(
            &format!("{ORDERS}/columns/title"),
            &admin,
            json!({ "data": { "name": "label", "nullable": false } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.data()["name"], "label");
    assert_eq!(renamed.data()["nullable"], false);
    let after = app.get("/api/data/public/orders?sort=id", &admin).await;
    assert_eq!(after.status, StatusCode::OK, "{:?}", after.body);
    assert_eq!(
        after.data()[0]["label"],
        "one",
        "the next read sees the new name"
    );
    assert!(after.data()[0].get("title").is_none());
    let columns = app
        .db
        .sql(&format!(
            "SELECT columns::text FROM svc.grants WHERE id = '{grant_id}'"
        ))
        .await;
    assert_eq!(
        columns.as_deref(),
        Some("{id,label,note}"),
        "the grant follows the rename"
    );

    let retyped = app
        .patch(
            &format!("{ORDERS}/columns/amount"),
            &admin,
            json!({ "data": { "dataType": "numeric(10,2)", "default": "0", "check": "amount >= 0",
                              "checkMessage": "Amount must not be negative", "unique": true } }),
        )
        .await;
    assert_eq!(retyped.status, StatusCode::OK, "{:?}", retyped.body);
    assert_eq!(retyped.data()["dataType"], "numeric(10,2)");
    assert_eq!(retyped.data()["default"], "0");
    assert_eq!(retyped.data()["unique"], true);
    assert_eq!(
        retyped.data()["checkMessage"],
        "Amount must not be negative"
    );
    assert_eq!(
        app.db
            .sql("SELECT sum(amount)::text FROM public.orders")
            .await
            .as_deref(),
        Some("60.00"),
        "existing values are converted"
    );
    let loosened = app
        .patch(
            &format!("{ORDERS}/columns/amount"),
            &admin,
            json!({ "data": { "default": null, "check": null, "unique": false } }),
        )
        .await;
    assert_eq!(loosened.status, StatusCode::OK, "{:?}", loosened.body);
    assert_eq!(loosened.data()["default"], Value::Null);
    assert_eq!(loosened.data()["check"], Value::Null);
    assert_eq!(loosened.data()["unique"], false);

    let dropped = app.delete(&format!("{ORDERS}/columns/note"), &admin).await;
    assert_eq!(dropped.status, StatusCode::NO_CONTENT, "{:?}", dropped.body);
    assert_eq!(column(&app, &admin, "orders", "note").await, Value::Null);
    let columns = app
        .db
        .sql(&format!(
            "SELECT columns::text FROM svc.grants WHERE id = '{grant_id}'"
        ))
        .await;
    assert_eq!(
        columns.as_deref(),
        Some("{id,label}"),
        "the grant loses a dropped column"
    );
    let read = app.get("/api/data/public/orders?sort=id", &admin).await;
    assert!(read.data()[0].get("note").is_none(), "{:?}", read.body);

    let audit = app
        .get("/admin/api/audit?action=schema.column_alter", &admin)
        .await;
    let entries = audit.data().as_array().unwrap();
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(entries.iter().any(|e| {
        e["details"]["sql"]
            .as_str()
            .unwrap()
            .contains("RENAME COLUMN")
    }));
    let audit = app
        .get("/admin/api/audit?action=schema.column_drop", &admin)
        .await;
    assert_eq!(audit.data().as_array().unwrap().len(), 1);
    app.db.destroy().await;
}

#[tokio::test]
async fn changes_existing_rows_refuse_answer_like_a_row_write_and_change_nothing() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    orders(&app, &admin).await;
    let catalog = app.db.sql(CATALOG).await;
    let cases = [
        (
            "title",
            json!({ "dataType": "integer" }),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            Some("dataType"),
        ),
        (
            "note",
            json!({ "nullable": false }),
            StatusCode::BAD_REQUEST,
            "NOT_NULL_VIOLATION",
            None,
        ),
        (
            "state",
            json!({ "unique": true }),
            StatusCode::CONFLICT,
            "CONFLICT",
            None,
        ),
        (
            "amount",
            json!({ "check": "length(amount) > 5" }),
            StatusCode::BAD_REQUEST,
            "CHECK_VIOLATION",
            None,
        ),
        (
            "title",
            json!({ "name": "state" }),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            Some("name"),
        ),
        (
            "title",
            json!({ "default": "(SELECT 1)" }),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            Some("default"),
        ),
        (
            "title",
            json!({ "dataType": "text; DROP TABLE public.orders" }),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            Some("dataType"),
        ),
        (
            "id",
            json!({ "nullable": true }),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            Some("nullable"),
        ),
        (
            "title",
            json!({}),
            StatusCode::BAD_REQUEST,
            "INVALID_PAYLOAD",
            None,
        ),
        (
            "nope",
            json!({ "name": "x" }),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            None,
        ),
    ];
    for (column, body, status, code, field) in cases {
        for path in [
            format!("{ORDERS}/columns/{column}"),
            format!("{ORDERS}/columns/{column}/preview"),
        ] {
            let answer = if path.ends_with("preview") {
                app.post(&path, &admin, json!({ "data": body })).await
            } else {
                app.patch(&path, &admin, json!({ "data": body })).await
            };
            assert_eq!(answer.status, status, "{path} {body}: {:?}", answer.body);
            assert_eq!(answer.code(), code, "{path} {body}: {:?}", answer.body);
            if let Some(field) = field {
                assert_eq!(
                    answer.body["errors"][0]["field"], field,
                    "{body}: {:?}",
                    answer.body
                );
            }
        }
    }
    let key = app.delete(&format!("{ORDERS}/columns/id"), &admin).await;
    assert_eq!(key.status, StatusCode::BAD_REQUEST, "{:?}", key.body);
    assert_eq!(key.code(), "INVALID_PAYLOAD");
    let missing = app
        .delete("/admin/api/schema/public/tables/nothing/columns/id", &admin)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.db.sql(CATALOG).await,
        catalog,
        "refusals change nothing"
    );
    app.db.destroy().await;
}

/// A schema change that cannot get its table's lock within its
/// `lock_timeout` (a reader holds the table) is 409 CONFLICT, never a 500;
/// once the reader is done the same change goes through.
#[tokio::test]
async fn a_change_that_waits_out_its_lock_is_a_conflict() {
    use sea_orm::{ConnectionTrait, TransactionTrait};
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    orders(&app, &admin).await;
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let reader = db.begin().await.unwrap();
    reader
        .execute_unprepared("SELECT 1 FROM public.orders")
        .await
        .unwrap();
    let waited = app.delete(&format!("{ORDERS}/columns/note"), &admin).await;
    assert_eq!(waited.status, StatusCode::CONFLICT, "{:?}", waited.body);
    assert_eq!(waited.code(), "CONFLICT");
    reader.commit().await.unwrap();
    let dropped = app.delete(&format!("{ORDERS}/columns/note"), &admin).await;
    assert_eq!(dropped.status, StatusCode::NO_CONTENT, "{:?}", dropped.body);
    db.close().await.unwrap();
}

#[tokio::test]
async fn a_column_in_use_is_neither_renamed_nor_dropped_and_the_user_is_named() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let grant = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": USERS_ROLE, "resourceId": resource, "action": "read", "filter": { "state": { "eq": "open" } } } }),
        )
        .await;
    assert_eq!(grant.status, StatusCode::CREATED, "{:?}", grant.body);
    let grant_id = grant.data()["id"].as_str().unwrap().to_owned();
    let view = app
        .post(
            "/admin/api/dataviews",
            &admin,
            json!({ "data": { "slug": "per-title", "name": "Per title", "source": "public.orders",
                              "columns": [{ "name": "title", "column": "title" }, { "name": "n", "agg": "count" }] } }),
        )
        .await;
    assert_eq!(view.status, StatusCode::CREATED, "{:?}", view.body);
    let workflow = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "by-amount", "name": "By amount",
                "trigger": { "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" },
                "steps": [{ "id": "c", "type": "condition", "if": { "start.data.body.x": { "eq": 1 } },
                            "then": [{ "id": "q", "type": "query", "resource": "public.orders", "sort": "-amount" }], "else": [] }] } }),
        )
        .await;
    assert_eq!(workflow.status, StatusCode::CREATED, "{:?}", workflow.body);
    let published = app
        .post(
            &format!(
                "/admin/api/workflows/{}/publish",
                workflow.data()["id"].as_str().unwrap()
            ),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(published.status, StatusCode::OK, "{:?}", published.body);
    app.db
        .sql("CREATE INDEX orders_note_customer_idx ON public.orders (note, customer_id)")
        .await;
    let customers = "/admin/api/schema/public/tables/customers";
    let catalog = app.db.sql(CATALOG).await;
    let in_use = [
        (
            format!("{ORDERS}/columns/state"),
            format!("grant {grant_id}"),
        ),
        (
            format!("{ORDERS}/columns/title"),
            "DataView per-title".to_owned(),
        ),
        (
            format!("{ORDERS}/columns/amount"),
            "workflow by-amount".to_owned(),
        ),
        (format!("{ORDERS}/columns/note"), "index orders_".to_owned()),
        (
            format!("{customers}/columns/id"),
            "public.orders".to_owned(),
        ),
    ];
    for (path, named) in &in_use {
        let rename = app
            .patch(path, &admin, json!({ "data": { "name": "renamed" } }))
            .await;
        assert_eq!(
            rename.status,
            StatusCode::CONFLICT,
            "{path}: {:?}",
            rename.body
        );
        let message = rename.body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(named.as_str()), "{path}: {message}");
        if !path.ends_with("/id") {
            let drop = app.delete(path, &admin).await;
            assert_eq!(drop.status, StatusCode::CONFLICT, "{path}: {:?}", drop.body);
        }
    }
    assert_eq!(app.db.sql(CATALOG).await, catalog, "nothing changed");
    // A column no one uses goes, with an index over it alone.
    app.db
        .sql("CREATE INDEX orders_customer_idx ON public.orders (customer_id)")
        .await;
    app.db
        .sql("DROP INDEX public.orders_note_customer_idx")
        .await;
    let dropped = app
        .delete(&format!("{ORDERS}/columns/customer_id"), &admin)
        .await;
    assert_eq!(dropped.status, StatusCode::NO_CONTENT, "{:?}", dropped.body);
    app.db.destroy().await;
}

#[tokio::test]
async fn a_renamed_table_keeps_its_resource_grants_exposure_views_and_workflows() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let grant = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": USERS_ROLE, "resourceId": resource, "action": "read" } }),
        )
        .await;
    assert_eq!(grant.status, StatusCode::CREATED);
    let view = app
        .post(
            "/admin/api/dataviews",
            &admin,
            json!({ "data": { "slug": "count", "name": "Count", "source": "public.orders", "columns": [{ "name": "n", "agg": "count" }] } }),
        )
        .await;
    assert_eq!(view.status, StatusCode::CREATED, "{:?}", view.body);
    let view_id = view.data()["id"].as_str().unwrap().to_owned();
    app.post(
        &format!("/admin/api/dataviews/{view_id}/publish"),
        &admin,
        json!({}),
    )
    .await;
    let workflow = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "list", "name": "List",
                "trigger": { "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" },
                "steps": [{ "id": "q", "type": "query", "resource": "public.orders", "sort": "id" },
                          { "id": "f", "type": "finish", "result": "{{steps.q.result}}" }] } }),
        )
        .await;
    let workflow_id = workflow.data()["id"].as_str().unwrap().to_owned();
    app.post(
        &format!("/admin/api/workflows/{workflow_id}/publish"),
        &admin,
        json!({}),
    )
    .await;
    // A draft edited since the publish, and a run waiting in a delay: the
    // published version, the draft and the run's definition all follow.
    let edited = app
        .patch(
            &format!("/admin/api/workflows/{workflow_id}"),
            &admin,
            json!({ "data": { "steps": [
                { "id": "q", "type": "query", "resource": "public.orders", "sort": "-id" },
                { "id": "f", "type": "finish", "result": "{{steps.q.result}}" }] } }),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{:?}", edited.body);
    let slow = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "slow", "name": "Slow",
                "trigger": { "type": "webhook", "method": "POST", "response": "async", "access": "authenticated" },
                "steps": [{ "id": "wait", "type": "delay", "ms": 3_600_000 },
                          { "id": "q", "type": "query", "resource": "public.orders" },
                          { "id": "log", "type": "insert", "resource": "public.orders",
                            "data": { "note": "{{steps.q.result}}", "resource": "public.orders" } }] } }),
        )
        .await;
    assert_eq!(slow.status, StatusCode::CREATED, "{:?}", slow.body);
    let slow_id = slow.data()["id"].as_str().unwrap().to_owned();
    app.post(
        &format!("/admin/api/workflows/{slow_id}/publish"),
        &admin,
        json!({}),
    )
    .await;
    let started = app
        .post("/api/workflows/slow/webhook", &admin, json!({}))
        .await;
    assert!(started.status.is_success(), "{:?}", started.body);
    // Read once so the instance caches the catalog.
    assert_eq!(
        app.get("/api/data/public/orders", &admin).await.status,
        StatusCode::OK
    );

    let renamed = app
        .patch(ORDERS, &admin, json!({ "data": { "name": "purchases" } }))
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.data()["name"], "purchases");
    assert_eq!(
        renamed.data()["resourceId"],
        resource.as_str(),
        "the resource id is kept"
    );
    assert_eq!(
        app.get("/api/data/public/orders", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    let rows = app.get("/api/data/public/purchases?sort=id", &admin).await;
    assert_eq!(
        rows.status,
        StatusCode::OK,
        "exposure follows: {:?}",
        rows.body
    );
    assert_eq!(rows.data().as_array().unwrap().len(), 3);
    app.create_user(
        &admin,
        "reader@example.com",
        "a long password 1",
        Some(vec![USERS_ROLE.into()]),
    )
    .await;
    let reader = app.login("reader@example.com", "a long password 1").await;
    assert_eq!(
        app.get("/api/data/public/purchases", &reader).await.status,
        StatusCode::OK,
        "grants follow"
    );
    let view = app
        .get(&format!("/admin/api/dataviews/{view_id}"), &admin)
        .await;
    assert_eq!(view.data()["source"], "public.purchases", "{:?}", view.body);
    let counted = app.get("/api/views/count", &admin).await;
    assert_eq!(counted.status, StatusCode::OK, "{:?}", counted.body);
    let run = app
        .post("/api/workflows/list/webhook", &admin, json!({}))
        .await;
    let stored = app
        .get(&format!("/admin/api/workflows/{workflow_id}"), &admin)
        .await;
    assert_eq!(
        stored.data()["steps"][0]["resource"],
        "public.purchases",
        "{:?}",
        stored.body
    );
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    assert_eq!(
        run.data()["result"].as_array().map(Vec::len),
        Some(3),
        "{:?}",
        run.body
    );
    assert_eq!(
        stored.data()["steps"][0]["sort"],
        "-id",
        "the draft stays edited"
    );
    let published = app
        .db
        .sql("SELECT published #>> '{steps,0,sort}' || ' ' || (published #>> '{steps,0,resource}') FROM svc.workflows WHERE slug = 'list'")
        .await;
    assert_eq!(published.as_deref(), Some("id public.purchases"));
    let waiting = app
        .db
        .sql("SELECT (definition #>> '{steps,1,resource}') || ' ' || (definition #>> '{steps,2,resource}') \
              || ' ' || (definition #>> '{steps,2,data,resource}') \
              FROM svc.workflow_runs r JOIN svc.workflows w ON w.id = r.workflow_id \
              WHERE w.slug = 'slow' AND r.status = 'RUNNING'")
        .await;
    assert_eq!(
        waiting.as_deref(),
        Some("public.purchases public.purchases public.orders"),
        "the run follows; the data it writes does not"
    );

    let taken = app
        .patch(
            "/admin/api/schema/public/tables/purchases",
            &admin,
            json!({ "data": { "name": "customers" } }),
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{:?}", taken.body);
    let bad = app
        .patch(
            "/admin/api/schema/public/tables/purchases",
            &admin,
            json!({ "data": { "name": "Bad Name" } }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["errors"][0]["field"], "name");
    app.db.destroy().await;
}

#[tokio::test]
async fn indexes_are_listed_built_read_back_refused_cleanly_and_dropped() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    orders(&app, &admin).await;
    let listed = app.get(&format!("{ORDERS}/indexes"), &admin).await;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.body);
    let names: Vec<&str> = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"orders_pkey"), "{names:?}");

    let filter = json!({ "state": { "eq": "open" } });
    let body = json!({ "data": { "columns": ["-id", "title"], "where": filter } });
    let preview = app
        .post(&format!("{ORDERS}/indexes/preview"), &admin, body.clone())
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{:?}", preview.body);
    assert!(
        preview.data()["sql"]
            .as_str()
            .unwrap()
            .starts_with("CREATE INDEX CONCURRENTLY \"orders_id_title_idx\"")
    );
    let built = app.post(&format!("{ORDERS}/indexes"), &admin, body).await;
    assert_eq!(built.status, StatusCode::CREATED, "{:?}", built.body);
    assert_eq!(
        built.data(),
        &json!({ "name": "orders_id_title_idx", "columns": ["-id", "title"], "unique": false,
                 "method": "btree", "where": filter, "valid": true })
    );
    let search = app
        .post(&format!("{ORDERS}/indexes"), &admin, json!({ "data": { "name": "orders_search", "columns": ["title"], "method": "search" } }))
        .await;
    assert_eq!(search.status, StatusCode::CREATED, "{:?}", search.body);
    assert_eq!(search.data()["method"], "search");
    assert_eq!(search.data()["columns"], json!(["title"]));

    let invalid = "SELECT count(*)::text FROM pg_index WHERE NOT indisvalid";
    let duplicates = app
        .post(
            &format!("{ORDERS}/indexes"),
            &admin,
            json!({ "data": { "columns": ["state"], "unique": true } }),
        )
        .await;
    assert_eq!(
        duplicates.status,
        StatusCode::CONFLICT,
        "{:?}",
        duplicates.body
    );
    assert_eq!(
        app.db.sql(invalid).await.as_deref(),
        Some("0"),
        "a failed build leaves nothing"
    );
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM pg_class WHERE relname = 'orders_state_idx'")
            .await
            .as_deref(),
        Some("0")
    );
    let bad_value = app
        .post(&format!("{ORDERS}/indexes"), &admin, json!({ "data": { "columns": ["customer_id"], "where": { "customer_id": { "gt": "many" } } } }))
        .await;
    assert_eq!(
        bad_value.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        bad_value.body
    );
    assert_eq!(bad_value.body["errors"][0]["field"], "where");
    let taken = app
        .post(
            &format!("{ORDERS}/indexes"),
            &admin,
            json!({ "data": { "name": "orders_search", "columns": ["state"] } }),
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{:?}", taken.body);
    let unknown = app
        .post(
            &format!("{ORDERS}/indexes"),
            &admin,
            json!({ "data": { "columns": ["nope"] } }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown.body["errors"][0]["field"], "columns[0]");

    let key = app
        .delete(&format!("{ORDERS}/indexes/orders_pkey"), &admin)
        .await;
    assert_eq!(key.status, StatusCode::CONFLICT, "{:?}", key.body);
    let dropped = app
        .delete(&format!("{ORDERS}/indexes/orders_id_title_idx"), &admin)
        .await;
    assert_eq!(dropped.status, StatusCode::NO_CONTENT, "{:?}", dropped.body);
    let gone = app
        .delete(&format!("{ORDERS}/indexes/orders_id_title_idx"), &admin)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.db
            .sql("SELECT index_filters::text FROM svc.resources WHERE table_name = 'orders'")
            .await
            .as_deref(),
        Some("{}"),
        "the dropped index's filter goes with it"
    );
    let audit = app
        .get("/admin/api/audit?action=schema.index_create", &admin)
        .await;
    assert_eq!(audit.data().as_array().unwrap().len(), 2);

    let tables = app.get("/admin/api/schema/public/tables", &admin).await;
    let customers = tables
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "customers")
        .unwrap();
    assert_eq!(customers["columns"][1]["unique"], true);
    assert_eq!(
        customers["referencedBy"],
        json!([{ "schema": "public", "table": "orders", "column": "customer_id", "targetSchema": "public",
                 "targetTable": "customers", "targetColumn": "id", "onDelete": "NO ACTION" }])
    );
    let orders = tables
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "orders")
        .unwrap();
    assert_eq!(
        orders["foreignKeys"],
        json!([{ "column": "customer_id", "targetSchema": "public", "targetTable": "customers",
                 "targetColumn": "id", "onDelete": "NO ACTION" }])
    );
    app.db.destroy().await;
}

#[tokio::test]
async fn writes_go_on_while_an_index_builds_over_a_million_rows() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let created = app
        .post(
            "/admin/api/schema/public/tables",
            &admin,
            json!({ "data": { "name": "events", "columns": [
                { "name": "id", "dataType": "bigint", "primaryKey": true },
                { "name": "payload", "dataType": "text" } ] } }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    app.db
        .sql("INSERT INTO public.events SELECT g, md5(g::text) FROM generate_series(1, 1000000) g")
        .await;
    let started = std::time::Instant::now();
    let build = {
        let app_url = app.address.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!(
                    "{app_url}/admin/api/schema/public/tables/events/indexes"
                ))
                .bearer_auth(admin)
                .json(&json!({ "data": { "columns": ["payload"] } }))
                .send()
                .await
                .map(|r| (r.status(), std::time::Instant::now()))
        })
    };
    // Wait until the build is under way, then write.
    let mut building = false;
    for _ in 0..200 {
        if app
            .db
            .sql("SELECT count(*)::text FROM pg_stat_progress_create_index")
            .await
            .as_deref()
            == Some("1")
        {
            building = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(building, "the build was seen under way");
    let mut written_during_build = 0;
    for i in 0..20 {
        app.db
            .sql(&format!(
                "INSERT INTO public.events VALUES ({}, 'during')",
                2_000_000 + i
            ))
            .await;
        if app
            .db
            .sql("SELECT count(*)::text FROM pg_stat_progress_create_index")
            .await
            .as_deref()
            == Some("1")
        {
            written_during_build += 1;
        }
    }
    let (status, finished) = build.await.unwrap().unwrap();
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        written_during_build > 0,
        "rows were written while the index was built"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let _ = finished;
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM public.events WHERE payload = 'during'")
            .await
            .as_deref(),
        Some("20")
    );
    app.db.destroy().await;
}
