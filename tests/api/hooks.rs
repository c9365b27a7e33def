//! Write hooks (API.md 18) through HTTP: a hook that completes a row
//! (an owner, a computed total), one that refuses it on every write path
//! (single, array, batch, upsert, CSV import, a workflow's data step, a
//! delete) with nothing written, two hooks in slug order, row filters on
//! the row as written, the timeout, the steps a hook may hold, and a hook
//! disabled on one instance seen by the next write on another.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

use crate::data::{create_role, expose, grant, keyed_table, member};
use crate::workflows::published;

/// `app.orders`, exposed for every method.
async fn orders(app: &TestApp, admin: &str) -> String {
    keyed_table(
        app,
        admin,
        "orders",
        json!([
            { "name": "item", "dataType": "text", "nullable": false },
            { "name": "quantity", "dataType": "integer", "nullable": false },
            { "name": "price", "dataType": "numeric" },
            { "name": "total", "dataType": "numeric" },
            { "name": "owner_id", "dataType": "uuid" },
            { "name": "note", "dataType": "text" },
            { "name": "sku", "dataType": "text", "unique": true },
        ]),
        &["GET", "POST", "PATCH", "DELETE"],
    )
    .await
}

fn hook(resource: &str, events: &[&str]) -> Value {
    json!({ "type": "beforeWrite", "resourceId": resource, "events": events })
}

/// A hook of one script whose result is written over the row.
fn scripted(code: &str) -> Value {
    json!([
        { "id": "s", "type": "script", "code": code },
        { "id": "done", "type": "finish", "result": "{{steps.s.result}}" },
    ])
}

/// A hook refusing rows of more than five items with OUT_OF_STOCK.
fn stock_rule() -> Value {
    json!([{ "id": "c", "type": "condition", "if": { "start.data.new.quantity": { "gt": 5 } },
             "then": [{ "id": "no", "type": "fail", "code": "OUT_OF_STOCK",
                        "message": "Only five left" }],
             "else": [] }])
}

/// `POST /api/data/app/orders` of `data` as `bearer`.
async fn order(app: &TestApp, bearer: &str, data: Value) -> Answer {
    app.post("/api/data/app/orders", bearer, json!({ "data": data }))
        .await
}

async fn count(app: &TestApp, admin: &str) -> usize {
    let list = app.get("/api/data/app/orders", admin).await;
    assert_eq!(list.status, StatusCode::OK, "{:?}", list.body);
    list.data().as_array().unwrap().len()
}

fn refused(answer: &Answer, code: &str) {
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
    assert_eq!(answer.code(), code, "{:?}", answer.body);
}

async fn import(app: &TestApp, bearer: &str, csv: &'static str) -> Answer {
    let response = app
        .client
        .post(format!("{}/api/data/app/orders", app.address))
        .bearer_auth(bearer)
        .header("Content-Type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    TestApp::answer(response).await
}

#[tokio::test]
async fn a_hook_sets_the_owner_and_a_computed_total_the_caller_cannot_write() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let role = create_role(&app, &admin, "Shoppers").await;
    let columns = json!(["item", "quantity", "price"]);
    for action in ["create", "update"] {
        grant(
            &app,
            &admin,
            &role,
            &resource,
            action,
            Value::Null,
            columns.clone(),
        )
        .await;
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
    let (user_id, shopper) = member(&app, &admin, "shopper@example.com", &role).await;

    // Control: the shopper may not write these columns itself.
    let own = order(
        &app,
        &shopper,
        json!({ "item": "tea", "quantity": 1, "owner_id": user_id }),
    )
    .await;
    assert_eq!(own.status, StatusCode::BAD_REQUEST, "{:?}", own.body);
    assert_eq!(own.body["errors"][0]["field"], "owner_id");
    let plain = order(
        &app,
        &shopper,
        json!({ "item": "tea", "quantity": 2, "price": 1.5 }),
    )
    .await;
    assert_eq!(plain.status, StatusCode::CREATED, "{:?}", plain.body);
    assert_eq!(plain.data()["total"], Value::Null);

    published(
        &app,
        &admin,
        "order-total",
        hook(&resource, &["insert", "update"]),
        scripted(
            "export default ({ start, user }) => { \
               const row = { ...start.data.old, ...start.data.new }; \
               return { owner_id: user.id, total: row.quantity * row.price, \
                        note: start.data.event + (start.data.old ? ':' + start.data.old.quantity : '') } }",
        ),
    )
    .await;
    let created = order(
        &app,
        &shopper,
        json!({ "item": "tea", "quantity": 3, "price": 2.5 }),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.data()["owner_id"], user_id.as_str());
    assert_eq!(
        created.data()["total"].as_f64(),
        Some(7.5),
        "{:?}",
        created.body
    );
    assert_eq!(created.data()["note"], "insert");
    let id = created.data()["id"].as_i64().unwrap();

    // On update the hook sees the stored row as `old` and the values sent as `new`.
    let changed = app
        .patch(
            &format!("/api/data/app/orders/{id}"),
            &shopper,
            json!({ "data": { "quantity": 4 } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{:?}", changed.body);
    assert_eq!(
        changed.data()["total"].as_f64(),
        Some(10.0),
        "{:?}",
        changed.body
    );
    assert_eq!(changed.data()["note"], "update:3");

    // An array: once per row.
    let many = order(
        &app,
        &shopper,
        json!([{ "item": "a", "quantity": 1, "price": 1 },
                               { "item": "b", "quantity": 2, "price": 3 }]),
    )
    .await;
    assert_eq!(many.status, StatusCode::CREATED, "{:?}", many.body);
    let totals: Vec<f64> = many
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["total"].as_f64().unwrap())
        .collect();
    assert_eq!(totals, vec![1.0, 6.0]);

    // An upsert on a taken key runs the update hooks with the stored row.
    let sku = app
        .patch(
            &format!("/api/data/app/orders/{id}"),
            &admin,
            json!({ "data": { "sku": "t1" } }),
        )
        .await;
    assert_eq!(sku.status, StatusCode::OK, "{:?}", sku.body);
    let upsert = app
        .post(
            "/api/data/app/orders?onConflict=sku",
            &admin,
            json!({ "data": { "sku": "t1", "item": "tea", "quantity": 5 } }),
        )
        .await;
    assert_eq!(upsert.status, StatusCode::CREATED, "{:?}", upsert.body);
    assert_eq!(
        upsert.data()["total"].as_f64(),
        Some(12.5),
        "{:?}",
        upsert.body
    );
    assert_eq!(upsert.data()["note"], "update:4");

    // An upsert's hook may not change the key it conflicts on.
    let case = published(
        &app,
        &admin,
        "sku-case",
        hook(&resource, &["insert", "update"]),
        scripted("export default ({ start }) => start.data.new.sku ? { sku: start.data.new.sku.toUpperCase() } : {}"),
    )
    .await;
    let moved = app
        .post(
            "/api/data/app/orders?onConflict=sku",
            &admin,
            json!({ "data": { "sku": "t1", "item": "tea", "quantity": 1 } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::BAD_REQUEST, "{:?}", moved.body);
    assert_eq!(moved.body["errors"][0]["field"], "sku");
    let deleted = app
        .delete(&format!("/admin/api/workflows/{case}"), &admin)
        .await;
    assert!(deleted.status.is_success(), "{:?}", deleted.body);

    // A CSV import runs the hooks on each row.
    let imported = import(&app, &shopper, "item,quantity,price\nrice,2,4\n").await;
    assert!(imported.status.is_success(), "{:?}", imported.body);
    let rice = app
        .get(
            "/api/data/app/orders?filter={\"item\":{\"eq\":\"rice\"}}",
            &admin,
        )
        .await;
    assert_eq!(
        rice.data()[0]["total"].as_f64(),
        Some(8.0),
        "{:?}",
        rice.body
    );
    assert_eq!(rice.data()[0]["owner_id"], user_id.as_str());

    // A hook that sets a column the table lacks is refused by name.
    published(
        &app,
        &admin,
        "z-bad-column",
        hook(&resource, &["insert"]),
        json!([{ "id": "done", "type": "finish", "result": { "nope": 1 } }]),
    )
    .await;
    let bad = order(
        &app,
        &shopper,
        json!({ "item": "x", "quantity": 1, "price": 1 }),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:?}", bad.body);
    assert_eq!(bad.body["errors"][0]["field"], "nope");
}

#[tokio::test]
async fn a_refusing_hook_writes_nothing_on_every_write_path() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    published(
        &app,
        &admin,
        "stock",
        hook(&resource, &["insert", "update", "delete"]),
        stock_rule(),
    )
    .await;

    // Control: a row within the rule goes in.
    let ok = order(
        &app,
        &admin,
        json!({ "item": "tea", "quantity": 1, "sku": "t1" }),
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{:?}", ok.body);
    let id = ok.data()["id"].as_i64().unwrap();

    let single = order(&app, &admin, json!({ "item": "tea", "quantity": 9 })).await;
    refused(&single, "OUT_OF_STOCK");
    assert_eq!(single.body["errors"][0]["message"], "Only five left");

    let array = order(
        &app,
        &admin,
        json!([{ "item": "a", "quantity": 1 }, { "item": "b", "quantity": 8 }]),
    )
    .await;
    refused(&array, "OUT_OF_STOCK");
    assert_eq!(array.body["meta"]["index"], 1, "{:?}", array.body);

    let batch = app
        .post("/api/batch", &admin, json!({ "data": [
            { "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "item": "c", "quantity": 1 } } },
            { "method": "PATCH", "path": format!("/api/data/app/orders/{id}"), "body": { "data": { "quantity": 7 } } },
        ] }))
        .await;
    refused(&batch, "OUT_OF_STOCK");
    assert_eq!(batch.body["meta"]["index"], 1, "{:?}", batch.body);

    let upsert = app
        .post(
            "/api/data/app/orders?onConflict=sku",
            &admin,
            json!({ "data": { "sku": "t1", "item": "tea", "quantity": 6 } }),
        )
        .await;
    refused(&upsert, "OUT_OF_STOCK");

    let csv = import(&app, &admin, "item,quantity\nd,1\ne,2\nf,99\n").await;
    refused(&csv, "OUT_OF_STOCK");
    assert_eq!(csv.body["meta"]["line"], 4, "{:?}", csv.body);

    assert_eq!(
        count(&app, &admin).await,
        1,
        "nothing of a refused request is written"
    );
    let row = app.get(&format!("/api/data/app/orders/{id}"), &admin).await;
    assert_eq!(row.data()["quantity"], 1);

    // A workflow's data step goes through the hooks too.
    published(
        &app,
        &admin,
        "restock",
        json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" }),
        json!([{ "id": "w", "type": "insert", "resource": "app.orders",
                 "data": { "item": "bulk", "quantity": "{{start.data.body.n}}" } }]),
    )
    .await;
    let stepped = app
        .post("/api/workflows/restock/webhook", &admin, json!({ "n": 50 }))
        .await;
    assert_eq!(stepped.status, StatusCode::OK, "{:?}", stepped.body);
    assert_eq!(stepped.data()["status"], "FAILED");
    assert_eq!(stepped.data()["error"]["code"], "OUT_OF_STOCK");
    let fine = app
        .post("/api/workflows/restock/webhook", &admin, json!({ "n": 2 }))
        .await;
    assert_eq!(fine.data()["status"], "SUCCEEDED", "{:?}", fine.body);
    assert_eq!(count(&app, &admin).await, 2);

    // A delete hook sees the stored row and may refuse it.
    published(
        &app,
        &admin,
        "keep-bulk",
        hook(&resource, &["delete"]),
        json!([{ "id": "c", "type": "condition", "if": { "start.data.old.item": { "eq": "bulk" } },
                 "then": [{ "id": "no", "type": "fail", "code": "KEEP", "message": "Bulk stays" }],
                 "else": [] }]),
    )
    .await;
    let bulk = app
        .get(
            "/api/data/app/orders?filter={\"item\":{\"eq\":\"bulk\"}}",
            &admin,
        )
        .await;
    let bulk_id = bulk.data()[0]["id"].as_i64().unwrap();
    refused(
        &app.delete(&format!("/api/data/app/orders/{bulk_id}"), &admin)
            .await,
        "KEEP",
    );
    let gone = app
        .delete(&format!("/api/data/app/orders/{id}"), &admin)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{:?}", gone.body);
    assert_eq!(count(&app, &admin).await, 1);
}

#[tokio::test]
async fn hooks_run_in_slug_order_each_seeing_the_last_ones_row() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    // Created in the other order: slugs decide.
    published(
        &app,
        &admin,
        "b-second",
        hook(&resource, &["insert"]),
        scripted("export default ({ start }) => ({ note: start.data.new.note + '>b' })"),
    )
    .await;
    published(
        &app,
        &admin,
        "a-first",
        hook(&resource, &["insert"]),
        scripted(
            "export default ({ start }) => ({ note: 'a', quantity: start.data.new.quantity * 2 })",
        ),
    )
    .await;
    let created = order(&app, &admin, json!({ "item": "x", "quantity": 2 })).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.data()["note"], "a>b");
    assert_eq!(created.data()["quantity"], 4);
}

#[tokio::test]
async fn a_hook_cannot_move_a_row_outside_the_callers_row_filter() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let role = create_role(&app, &admin, "Small").await;
    let small = json!({ "quantity": { "lt": 10 } });
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "create",
        small.clone(),
        Value::Null,
    )
    .await;
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
    let (_, buyer) = member(&app, &admin, "small@example.com", &role).await;
    published(
        &app,
        &admin,
        "tenfold",
        hook(&resource, &["insert"]),
        scripted(
            "export default ({ start }) => start.data.new.item === 'big' \
                        ? { quantity: start.data.new.quantity * 10 } : {}",
        ),
    )
    .await;
    // Control: a row the hook leaves inside the filter goes in.
    let fine = order(&app, &buyer, json!({ "item": "small", "quantity": 3 })).await;
    assert_eq!(fine.status, StatusCode::CREATED, "{:?}", fine.body);
    let moved = order(&app, &buyer, json!({ "item": "big", "quantity": 3 })).await;
    assert_eq!(moved.status, StatusCode::FORBIDDEN, "{:?}", moved.body);
    assert_eq!(count(&app, &admin).await, 1);
}

#[tokio::test]
async fn a_slow_hook_is_504_and_hooks_hold_only_pure_steps() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    // A hook with an http or insert step is refused when saved.
    for step in [
        json!({ "id": "h", "type": "http", "method": "GET", "url": "https://example.com" }),
        json!({ "id": "d", "type": "delay", "ms": 10 }),
        json!({ "id": "c", "type": "condition", "if": { "start.data.event": { "eq": "insert" } },
                "then": [{ "id": "i", "type": "insert", "resource": "app.orders", "data": {} }],
                "else": [] }),
    ] {
        let answer = app
            .post("/admin/api/workflows", &admin, json!({ "data": {
                "slug": "bad", "name": "bad", "trigger": hook(&resource, &["insert"]), "steps": [step] } }))
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{:?}", answer.body);
        assert_eq!(answer.code(), "INVALID_PAYLOAD");
        assert!(
            answer.body["errors"][0]["field"]
                .as_str()
                .unwrap()
                .starts_with("steps[0]"),
            "{:?}",
            answer.body
        );
    }

    // The setting takes 10 to 30,000 ms.
    for refused in [9, 30_001] {
        let out_of_range = app
            .patch(
                "/admin/api/settings",
                &admin,
                json!({ "data": { "workflows.hook_timeout_ms": refused } }),
            )
            .await;
        assert_eq!(
            out_of_range.status,
            StatusCode::BAD_REQUEST,
            "{:?}",
            out_of_range.body
        );
    }
    let settings = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "workflows.hook_timeout_ms": 200 } }),
        )
        .await;
    assert_eq!(settings.status, StatusCode::OK, "{:?}", settings.body);
    published(
        &app,
        &admin,
        "slow",
        hook(&resource, &["insert"]),
        scripted(
            "export default ({ start }) => { if (start.data.new.item === 'slow') \
                        { const end = Date.now() + 1500; while (Date.now() < end) {} } return {} }",
        ),
    )
    .await;
    // Control: a fast path through the same hook.
    let fast = order(&app, &admin, json!({ "item": "fast", "quantity": 1 })).await;
    assert_eq!(fast.status, StatusCode::CREATED, "{:?}", fast.body);
    let slow = order(&app, &admin, json!({ "item": "slow", "quantity": 1 })).await;
    assert_eq!(slow.status, StatusCode::GATEWAY_TIMEOUT, "{:?}", slow.body);
    assert_eq!(slow.code(), "WORKFLOW_SYNC_TIMEOUT");
    assert_eq!(count(&app, &admin).await, 1);

    // A session remembered by its last write, then ended: the hook's
    // timeout is not what it is answered.
    let ended = app
        .login(testkit::ADMIN_EMAIL, testkit::ADMIN_PASSWORD)
        .await;
    let known = order(&app, &ended, json!({ "item": "fast", "quantity": 1 })).await;
    assert_eq!(known.status, StatusCode::CREATED, "{:?}", known.body);
    let out = app.post("/api/auth/logout", &ended, json!({})).await;
    assert!(out.status.is_success(), "{:?}", out.body);
    let late = order(&app, &ended, json!({ "item": "slow", "quantity": 1 })).await;
    assert_eq!(late.status, StatusCode::UNAUTHORIZED, "{:?}", late.body);
    assert_eq!(count(&app, &admin).await, 2);
}

#[tokio::test]
async fn a_hook_disabled_on_one_instance_is_seen_by_the_next_write_on_another() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    expose(&app, &admin, &resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    let peer = app.spawn_peer().await;
    let post_on_peer = |quantity: i64| {
        let (client, admin, peer) = (app.client.clone(), admin.clone(), peer.clone());
        async move {
            let response = client
                .post(format!("{peer}/api/data/app/orders"))
                .bearer_auth(&admin)
                .json(&json!({ "data": { "item": "x", "quantity": quantity } }))
                .send()
                .await
                .unwrap();
            TestApp::answer(response).await
        }
    };
    // The peer caches the catalog with no hook.
    assert_eq!(post_on_peer(9).await.status, StatusCode::CREATED);
    let id = published(
        &app,
        &admin,
        "stock",
        hook(&resource, &["insert"]),
        stock_rule(),
    )
    .await;
    refused(&post_on_peer(9).await, "OUT_OF_STOCK");
    let disabled = app
        .patch(
            &format!("/admin/api/workflows/{id}"),
            &admin,
            json!({ "data": { "enabled": false } }),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::OK, "{:?}", disabled.body);
    assert_eq!(post_on_peer(9).await.status, StatusCode::CREATED);
    let enabled = app
        .patch(
            &format!("/admin/api/workflows/{id}"),
            &admin,
            json!({ "data": { "enabled": true } }),
        )
        .await;
    assert_eq!(enabled.status, StatusCode::OK);
    refused(&post_on_peer(9).await, "OUT_OF_STOCK");
    let deleted = app
        .delete(&format!("/admin/api/workflows/{id}"), &admin)
        .await;
    assert!(deleted.status.is_success(), "{:?}", deleted.body);
    assert_eq!(post_on_peer(9).await.status, StatusCode::CREATED);
}

#[tokio::test]
async fn an_upserted_row_deleted_while_its_update_hooks_ran_goes_in_through_the_insert_hooks() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = orders(&app, &admin).await;
    let noted = |note: &str, spin_ms: u32| {
        json!([
            { "id": "s", "type": "script", "timeoutMs": 5000, "code": format!(
                "export default ({{ start }}) => {{ if (start.data.new.item === 'slow') \
                 {{ const end = Date.now() + {spin_ms}; while (Date.now() < end) {{}} }} \
                 return {{ note: '{note}' }} }}") },
            { "id": "done", "type": "finish", "result": "{{steps.s.result}}" },
        ])
    };
    published(
        &app,
        &admin,
        "a-update",
        hook(&resource, &["update"]),
        noted("update", 800),
    )
    .await;
    published(
        &app,
        &admin,
        "b-insert",
        hook(&resource, &["insert"]),
        noted("insert", 0),
    )
    .await;
    let first = order(
        &app,
        &admin,
        json!({ "sku": "k1", "item": "tea", "quantity": 1 }),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let id = first.data()["id"].as_i64().unwrap();
    let upsert = |item: &str| {
        app.post(
            "/api/data/app/orders?onConflict=sku",
            &admin,
            json!({ "data": { "sku": "k1", "item": item, "quantity": 2 } }),
        )
    };
    // Control: an upsert of the taken key runs the update hooks.
    let control = upsert("fast").await;
    assert_eq!(control.status, StatusCode::CREATED, "{:?}", control.body);
    assert_eq!(control.data()["note"], "update", "{:?}", control.body);
    assert_eq!(control.data()["id"].as_i64(), Some(id));

    // The row goes while its update hook runs: the write is planned again,
    // and the row goes in as new through the insert hooks.
    let remove = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        app.delete(&format!("/api/data/app/orders/{id}"), &admin)
            .await
    };
    let (upserted, removed) = tokio::join!(upsert("slow"), remove);
    assert!(removed.status.is_success(), "{:?}", removed.body);
    assert_eq!(upserted.status, StatusCode::CREATED, "{:?}", upserted.body);
    assert_eq!(upserted.data()["note"], "insert", "{:?}", upserted.body);
    assert_ne!(upserted.data()["id"].as_i64(), Some(id));
    assert_eq!(count(&app, &admin).await, 1);
}
