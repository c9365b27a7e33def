//! Snapshots (API.md section 12): a staging configuration promoted to a fresh
//! instance and read back byte-identical; diffs, destructive steps, refusals,
//! the command line, and random table histories that survive the round trip.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

use crate::USERS_ROLE;

async fn created(app: &TestApp, admin: &str, path: &str, body: Value) -> Value {
    let answer = app.post(path, admin, json!({ "data": body })).await;
    assert!(answer.status.is_success(), "{path}: {:?}", answer.body);
    answer.data().clone()
}

/// The administrator's user id.
async fn admin_id(app: &TestApp, admin: &str) -> String {
    let users = app.get("/admin/api/users?search=admin", admin).await;
    users.data()[0]["id"].as_str().unwrap().to_owned()
}

/// A configuration with something of every kind.
async fn staging(app: &TestApp, admin: &str) {
    created(
        app,
        admin,
        "/admin/api/schema/shop/tables",
        json!({ "name": "customers", "columns": [
        { "name": "id", "dataType": "bigint", "identity": "ALWAYS", "primaryKey": true },
        { "name": "email", "dataType": "text", "nullable": false, "unique": true } ] }),
    )
    .await;
    let orders = created(app, admin, "/admin/api/schema/shop/tables", json!({ "name": "orders", "columns": [
        { "name": "id", "dataType": "uuid", "primaryKey": true, "default": "gen_random_uuid()" },
        { "name": "title", "dataType": "text" },
        { "name": "amount", "dataType": "numeric(10,2)", "default": "0", "check": "amount >= 0", "checkMessage": "No negative amounts" },
        { "name": "state", "dataType": "text", "default": "'open'" },
        { "name": "customer_id", "dataType": "bigint", "foreignKey": { "targetTable": "customers", "targetColumn": "id", "onDelete": "CASCADE" } } ] })).await;
    let resource = orders["resourceId"].as_str().unwrap().to_owned();
    created(
        app,
        admin,
        "/admin/api/schema/shop/tables/orders/indexes",
        json!({ "columns": ["-amount"], "where": { "state": { "eq": "open" } } }),
    )
    .await;
    created(
        app,
        admin,
        "/admin/api/schema/shop/tables/orders/indexes",
        json!({ "columns": ["title"], "method": "search" }),
    )
    .await;
    let exposed = app
        .patch(
            &format!("/admin/api/resources/{resource}"),
            admin,
            json!({ "data": { "exposedMethods": ["GET", "POST"] } }),
        )
        .await;
    assert_eq!(exposed.status, StatusCode::OK);
    let role = created(
        app,
        admin,
        "/admin/api/roles",
        json!({ "name": "Editors", "description": "Edit orders", "apiAccess": true }),
    )
    .await;
    let role_id = role["id"].as_str().unwrap();
    created(
        app,
        admin,
        "/admin/api/grants",
        json!({ "roleId": role_id, "resourceId": resource, "action": "read",
        "filter": { "state": { "eq": "open" } }, "columns": ["id", "title", "state"] }),
    )
    .await;
    created(
        app,
        admin,
        "/admin/api/grants",
        json!({ "roleId": USERS_ROLE, "resourceId": resource, "action": "create" }),
    )
    .await;
    let view = created(app, admin, "/admin/api/dataviews", json!({ "slug": "per-state", "name": "Per state", "source": "shop.orders",
        "columns": [{ "name": "state", "column": "state" }, { "name": "total", "agg": "sum", "column": "amount" }] })).await;
    let view_id = view["id"].as_str().unwrap();
    created(
        app,
        admin,
        &format!("/admin/api/dataviews/{view_id}/publish"),
        json!({}),
    )
    .await;
    created(
        app,
        admin,
        "/admin/api/grants",
        json!({ "roleId": role_id, "dataViewId": view_id, "action": "read" }),
    )
    .await;
    created(app, admin, "/admin/api/dashboards", json!({ "slug": "sales", "name": "Sales", "widgets": [
        { "id": "w1", "type": "bar", "title": "Per state", "dataViewId": view_id, "x": "state", "y": ["total"],
          "layout": { "col": 0, "row": 0, "w": 6, "h": 4 } }] })).await;
    let workflow = created(app, admin, "/admin/api/workflows", json!({ "slug": "intake", "name": "Intake",
        "trigger": { "type": "webhook", "method": "POST", "response": "sync", "access": "public", "executeAs": admin_id(app, admin).await },
        "steps": [{ "id": "add", "type": "insert", "resource": "shop.orders", "data": { "title": "{{start.data.body.title}}" } },
                  { "id": "done", "type": "finish", "result": "{{steps.add.result}}" }] })).await;
    let workflow_id = workflow["id"].as_str().unwrap();
    created(
        app,
        admin,
        &format!("/admin/api/workflows/{workflow_id}/publish"),
        json!({}),
    )
    .await;
    created(app, admin, "/admin/api/workflows", json!({ "slug": "on-order", "name": "On order",
        "trigger": { "type": "dbEvent", "resourceId": resource, "events": ["insert"] },
        "steps": [{ "id": "t", "type": "transform", "output": { "seen": "{{start.data.new.id}}" } }] })).await;
    created(
        app,
        admin,
        "/admin/api/grants",
        json!({ "roleId": role_id, "workflowId": workflow_id, "action": "invoke" }),
    )
    .await;
    let settings = app
        .patch("/admin/api/settings", admin, json!({ "data": { "auth.registration_enabled": true, "auth.registration_role_id": role_id } }))
        .await;
    assert_eq!(settings.status, StatusCode::OK, "{:?}", settings.body);
}

/// The snapshot as the route answers it, as text.
async fn exported(app: &TestApp, admin: &str) -> (Value, String) {
    let answer = app.get("/admin/api/snapshot", admin).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let text = serde_json::to_string(answer.data()).unwrap();
    (answer.data().clone(), text)
}

#[tokio::test]
async fn a_staging_configuration_reaches_a_fresh_instance_and_comes_back_identical() {
    let staging_app = spawn_app().await;
    let admin = staging_app.admin_session().await;
    staging(&staging_app, &admin).await;
    let (snapshot, text) = exported(&staging_app, &admin).await;
    assert_eq!(
        exported(&staging_app, &admin).await.1,
        text,
        "two exports of one state are identical"
    );
    assert!(!text.contains("clientSecret"));
    assert_eq!(snapshot["settings"]["auth.registration_role_id"], "Editors");
    assert_eq!(
        snapshot["workflows"][0]["published"]["trigger"]["executeAs"], "admin@example.com",
        "{}",
        snapshot["workflows"]
    );

    let production = spawn_app().await;
    let prod_admin = production.admin_session().await;
    let before = exported(&production, &prod_admin).await.1;
    let diff = production
        .post(
            "/admin/api/snapshot/diff",
            &prod_admin,
            json!({ "data": snapshot }),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    assert_eq!(diff.data()["destructive"], false);
    let steps = diff.data()["steps"].as_array().unwrap().clone();
    let first = &steps[0];
    assert_eq!(
        (first["action"].as_str(), first["kind"].as_str()),
        (Some("create"), Some("role")),
        "{steps:?}"
    );
    assert!(steps.iter().any(|s| {
        s["kind"] == "table"
            && s["sql"]
                .as_str()
                .unwrap_or("")
                .contains("CREATE TABLE \"shop\".\"orders\"")
    }));
    assert_eq!(
        exported(&production, &prod_admin).await.1,
        before,
        "a diff changes nothing"
    );

    // Its workflow runs as an administrator: applied only when the
    // request says so (API.md 17), the diff marking that step.
    assert!(
        steps
            .iter()
            .any(|s| s["kind"] == "workflow" && s["adminPower"] == true)
    );
    let unconsented = apply(&production, &prod_admin, json!({ "snapshot": snapshot })).await;
    assert_eq!(unconsented.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        unconsented.body["errors"][0]["field"],
        "workflows[0].published.trigger.executeAs"
    );
    let applied = apply(
        &production,
        &prod_admin,
        json!({ "snapshot": snapshot, "allowAdminPower": true }),
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    assert_eq!(
        applied.data()["steps"].as_array().unwrap().len(),
        steps.len()
    );
    assert_eq!(
        exported(&production, &prod_admin).await.1,
        text,
        "the same snapshot comes back out"
    );
    let again = production
        .post(
            "/admin/api/snapshot/diff",
            &prod_admin,
            json!({ "data": snapshot }),
        )
        .await;
    assert_eq!(
        again.data()["steps"],
        json!([]),
        "applying twice changes nothing more"
    );
    let twice = apply(&production, &prod_admin, json!({ "snapshot": snapshot })).await;
    assert_eq!(twice.data()["steps"], json!([]));

    // The promoted configuration works: the public webhook writes a row
    // that the Data API then reads, with the check message in place.
    let run = production
        .client
        .post(format!(
            "{}/api/workflows/intake/webhook",
            production.address
        ))
        .json(&json!({ "title": "first" }))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), StatusCode::OK, "{:?}", run.text().await);
    let rows = production.get("/api/data/shop/orders", &prod_admin).await;
    assert_eq!(rows.data()[0]["title"], "first", "{:?}", rows.body);
    let negative = production
        .post(
            "/api/data/shop/orders",
            &prod_admin,
            json!({ "data": { "title": "x", "amount": -1 } }),
        )
        .await;
    assert_eq!(negative.code(), "CHECK_VIOLATION");
    assert!(
        negative.body.to_string().contains("No negative amounts"),
        "{:?}",
        negative.body
    );
    let audit = production
        .get("/admin/api/audit?action=snapshot.apply", &prod_admin)
        .await;
    let entries = audit.data().as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().any(|e| {
        e["details"]["steps"]
            .as_array()
            .is_some_and(|s| s.len() == steps.len())
    }));
    staging_app.db.destroy().await;
    production.db.destroy().await;
}

#[tokio::test]
async fn destructive_steps_wait_for_consent_and_refusals_change_nothing() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    staging(&app, &admin).await;
    let (snapshot, text) = exported(&app, &admin).await;

    let mut smaller = snapshot.clone();
    smaller["tables"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "orders");
    smaller["resources"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["table"] != "orders");
    smaller["grants"]
        .as_array_mut()
        .unwrap()
        .retain(|g| g["resource"] != "shop.orders");
    smaller["workflows"] = json!([]);
    smaller["grants"]
        .as_array_mut()
        .unwrap()
        .retain(|g| g.get("workflow").is_none());
    smaller["dataviews"] = json!([]);
    smaller["dashboards"] = json!([]);
    smaller["grants"]
        .as_array_mut()
        .unwrap()
        .retain(|g| g.get("dataView").is_none());
    let diff = app
        .post(
            "/admin/api/snapshot/diff",
            &admin,
            json!({ "data": smaller }),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    assert_eq!(diff.data()["destructive"], true);
    let kinds: Vec<String> = diff.data()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {} {}",
                s["action"].as_str().unwrap(),
                s["kind"].as_str().unwrap(),
                s["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("drop table shop.orders"),
        "{kinds:?}"
    );
    let refused = apply(&app, &admin, json!({ "snapshot": smaller })).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.body);
    assert_eq!(
        exported(&app, &admin).await.1,
        text,
        "a refused apply changes nothing"
    );

    let cases = [
        (json!({ "version": 2 }), "version"),
        (json!({ "tables": [] }), "version"),
        (
            json!({ "version": 1, "grants": [{ "role": "Nobody", "resource": "shop.orders", "action": "read" }] }),
            ".role",
        ),
        (
            json!({ "version": 1, "grants": [{ "role": "Users", "resource": "shop.nothing", "action": "read" }] }),
            ".resource",
        ),
        (
            json!({ "version": 1, "tables": [{ "schema": "shop", "name": "bad", "columns": [{ "name": "x", "dataType": "text; DROP TABLE shop.orders" }] }] }),
            ".columns[0].dataType",
        ),
        (
            json!({ "version": 1, "settings": { "mcp.enabled": true } }),
            "settings.mcp.enabled",
        ),
        (
            json!({ "version": 1, "roles": [{ "name": "administrators" }] }),
            "roles.administrators",
        ),
        (
            json!({ "version": 1, "resources": [{ "schema": "pg_catalog", "table": "pg_authid", "exposedMethods": ["GET"] }] }),
            "resources.pg_catalog.pg_authid.schema",
        ),
        (
            json!({ "version": 1, "settings": { "auth.password_min_length": "long" } }),
            "settings.auth.password_min_length",
        ),
    ];
    for (body, field) in cases {
        let mut merged = snapshot.clone();
        let mut field = field.to_owned();
        for (key, value) in body.as_object().unwrap() {
            if key == "version" || !merged[key].is_array() {
                merged[key] = value.clone();
            } else {
                // Appended: the refusal names its place in the list as sent.
                if field.starts_with('.') {
                    field = format!("{key}[{}]{field}", merged[key].as_array().unwrap().len());
                }
                merged[key]
                    .as_array_mut()
                    .unwrap()
                    .extend(value.as_array().unwrap().iter().cloned());
            }
        }
        if body.get("version").is_none() {
            merged.as_object_mut().unwrap().remove("version");
        }
        for path in ["/admin/api/snapshot/diff", "/admin/api/snapshot/apply"] {
            let payload = if path.ends_with("diff") {
                merged.clone()
            } else {
                json!({ "snapshot": merged })
            };
            let answer = app.post(path, &admin, json!({ "data": payload })).await;
            assert_eq!(
                answer.status,
                StatusCode::BAD_REQUEST,
                "{path} {body}: {:?}",
                answer.body
            );
            assert_eq!(answer.code(), "INVALID_PAYLOAD");
            let named = answer.body["errors"][0]["field"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(named, field, "{path} {body}");
        }
    }
    assert_eq!(
        exported(&app, &admin).await.1,
        text,
        "refusals change nothing"
    );

    let consented = apply(
        &app,
        &admin,
        json!({ "snapshot": smaller, "allowDestructive": true }),
    )
    .await;
    assert_eq!(consented.status, StatusCode::OK, "{:?}", consented.body);
    assert_eq!(
        app.get("/api/data/shop/orders", &admin).await.status,
        StatusCode::NOT_FOUND
    );
    let users = app.get("/api/data/shop/customers", &admin).await;
    assert_ne!(users.status, StatusCode::INTERNAL_SERVER_ERROR);
    app.db.destroy().await;
}

/// A tiny deterministic generator for the random histories.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % below as u64).unwrap()
    }
}

/// Random table and column changes through the Admin API; some are refused,
/// which is part of the history too.
async fn random_history(app: &TestApp, admin: &str, seed: u64) {
    let mut rng = Seeded(seed);
    let types = [
        "text",
        "integer",
        "bigint",
        "boolean",
        "numeric(8,2)",
        "timestamp with time zone",
        "uuid",
        "jsonb",
        "text[]",
    ];
    let mut tables: Vec<(String, Vec<String>)> = Vec::new();
    for step in 0..40 {
        let base = "/admin/api/schema/public/tables";
        let choice = if tables.is_empty() { 0 } else { rng.next(9) };
        match choice {
            0 => {
                let name = format!("t{step}");
                let mut columns = vec![
                    json!({ "name": "id", "dataType": "bigint", "identity": "ALWAYS", "primaryKey": true }),
                ];
                let mut names = vec!["id".to_owned()];
                for c in 0..rng.next(4) + 1 {
                    let column = format!("c{c}");
                    columns
                        .push(json!({ "name": column, "dataType": types[rng.next(types.len())] }));
                    names.push(column);
                }
                let answer = app
                    .post(
                        base,
                        admin,
                        json!({ "data": { "name": name, "columns": columns } }),
                    )
                    .await;
                assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
                let id = answer.data()["resourceId"].as_str().unwrap().to_owned();
                app.patch(
                    &format!("/admin/api/resources/{id}"),
                    admin,
                    json!({ "data": { "exposedMethods": ["GET"] } }),
                )
                .await;
                tables.push((name, names));
            }
            1 => {
                let t = rng.next(tables.len());
                let column = format!("a{step}");
                let body = json!({ "name": column, "dataType": types[rng.next(types.len())], "unique": rng.next(2) == 0 });
                let answer = app
                    .post(
                        &format!("{base}/{}/columns", tables[t].0),
                        admin,
                        json!({ "data": body }),
                    )
                    .await;
                assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
                tables[t].1.push(column);
            }
            2 => {
                let t = rng.next(tables.len());
                let c = rng.next(tables[t].1.len());
                if tables[t].1[c] == "id" {
                    continue;
                }
                let new = format!("r{step}");
                let answer = app
                    .patch(
                        &format!("{base}/{}/columns/{}", tables[t].0, tables[t].1[c]),
                        admin,
                        json!({ "data": { "name": new } }),
                    )
                    .await;
                if answer.status == StatusCode::OK {
                    tables[t].1[c] = new;
                }
            }
            3 => {
                let t = rng.next(tables.len());
                let c = rng.next(tables[t].1.len());
                let patch = match rng.next(4) {
                    0 => json!({ "nullable": false }),
                    1 => json!({ "default": null }),
                    2 => json!({ "dataType": "text" }),
                    _ => json!({ "unique": true }),
                };
                app.patch(
                    &format!("{base}/{}/columns/{}", tables[t].0, tables[t].1[c]),
                    admin,
                    json!({ "data": patch }),
                )
                .await;
            }
            4 => {
                let t = rng.next(tables.len());
                let c = rng.next(tables[t].1.len());
                let answer = app
                    .delete(
                        &format!("{base}/{}/columns/{}", tables[t].0, tables[t].1[c]),
                        admin,
                    )
                    .await;
                if answer.status == StatusCode::NO_CONTENT {
                    tables[t].1.remove(c);
                }
            }
            5 => {
                let t = rng.next(tables.len());
                let c = rng.next(tables[t].1.len());
                let column = if rng.next(2) == 0 {
                    tables[t].1[c].clone()
                } else {
                    format!("-{}", tables[t].1[c])
                };
                app.post(
                    &format!("{base}/{}/indexes", tables[t].0),
                    admin,
                    json!({ "data": { "columns": [column] } }),
                )
                .await;
            }
            6 => {
                let t = rng.next(tables.len());
                let new = format!("n{step}");
                let answer = app
                    .patch(
                        &format!("{base}/{}", tables[t].0),
                        admin,
                        json!({ "data": { "name": new } }),
                    )
                    .await;
                assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
                tables[t].0 = new;
            }
            7 => {
                let t = rng.next(tables.len());
                let c = rng.next(tables[t].1.len());
                let check = format!("{} IS NOT NULL OR id > 0", tables[t].1[c]);
                app.patch(&format!("{base}/{}/columns/{}", tables[t].0, tables[t].1[c]), admin,
                    json!({ "data": { "check": check, "checkMessage": format!("message {step}") } })).await;
            }
            _ => {
                let t = rng.next(tables.len());
                let answer = app.delete(&format!("{base}/{}", tables[t].0), admin).await;
                assert_eq!(answer.status, StatusCode::NO_CONTENT, "{:?}", answer.body);
                tables.remove(t);
            }
        }
    }
}

#[tokio::test]
async fn random_table_histories_survive_export_apply_and_export() {
    for seed in [
        0x9e37_79b9_7f4a_7c15_u64,
        0x2545_f491_4f6c_dd1d,
        0x1234_5678_9abc_def1,
    ] {
        let source = spawn_app().await;
        let admin = source.admin_session().await;
        random_history(&source, &admin, seed).await;
        let (snapshot, text) = exported(&source, &admin).await;
        let target = spawn_app().await;
        let target_admin = target.admin_session().await;
        let applied = apply(&target, &target_admin, json!({ "snapshot": snapshot })).await;
        assert_eq!(
            applied.status,
            StatusCode::OK,
            "seed {seed:x}: {:?}",
            applied.body
        );
        assert_eq!(
            exported(&target, &target_admin).await.1,
            text,
            "seed {seed:x}: byte-identical"
        );
        for table in snapshot["tables"].as_array().unwrap() {
            let path = format!(
                "/api/data/{}/{}?limit=1",
                table["schema"].as_str().unwrap(),
                table["name"].as_str().unwrap()
            );
            let insert = format!(
                "DO $$ BEGIN INSERT INTO {}.{} DEFAULT VALUES; EXCEPTION WHEN others THEN NULL; END $$",
                table["schema"].as_str().unwrap(),
                table["name"].as_str().unwrap()
            );
            source.db.sql(&insert).await;
            target.db.sql(&insert).await;
            let keys = |v: &Value| -> Vec<String> {
                v["data"][0]
                    .as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default()
            };
            let (a, b) = (
                source.get(&path, &admin).await,
                target.get(&path, &target_admin).await,
            );
            assert_eq!(a.status, b.status, "seed {seed:x} {path}");
            assert_eq!(
                keys(&a.body),
                keys(&b.body),
                "seed {seed:x} {path}: the same columns"
            );
        }
        source.db.destroy().await;
        target.db.destroy().await;
    }
}

#[tokio::test]
async fn the_command_line_exports_diffs_and_applies_without_a_server() {
    let staging_app = spawn_app().await;
    let admin = staging_app.admin_session().await;
    staging(&staging_app, &admin).await;
    let dir = std::env::temp_dir().join(format!("tessera-snapshot-{}", staging_app.db.name));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("staging.json");
    let export = crate::binary::tessera(
        &["snapshot", "export", "--output", file.to_str().unwrap()],
        &staging_app.db.url,
    )
    .await;
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    assert!(
        export.stdout.is_empty(),
        "logs go to stderr, the snapshot to the file"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written, exported(&staging_app, &admin).await.0);

    let production = testkit::TestDatabase::create().await;
    let migrate = crate::binary::tessera(&["migrate"], &production.url).await;
    assert!(migrate.status.success());
    // The workflow runs as the administrator, by email: production has one too.
    let create = crate::binary::tessera(
        &[
            "admin",
            "create",
            "--email",
            "admin@example.com",
            "--password",
            "a long password 1",
        ],
        &production.url,
    )
    .await;
    assert!(
        create.status.success(),
        "{}",
        String::from_utf8_lossy(&create.stderr)
    );
    let diff = crate::binary::tessera(
        &["snapshot", "diff", file.to_str().unwrap()],
        &production.url,
    )
    .await;
    assert!(
        diff.status.success(),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    let lines = String::from_utf8(diff.stdout).unwrap();
    assert!(
        lines.lines().any(|l| l == "create table shop.orders"),
        "{lines}"
    );
    let apply = crate::binary::tessera(
        &[
            "snapshot",
            "apply",
            file.to_str().unwrap(),
            "--allow-admin-power",
        ],
        &production.url,
    )
    .await;
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stderr)
    );
    let out = crate::binary::tessera(&["snapshot", "export"], &production.url).await;
    let back: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        back, written,
        "the same snapshot comes back out of production"
    );
    let empty = crate::binary::tessera(
        &["snapshot", "diff", file.to_str().unwrap()],
        &production.url,
    )
    .await;
    assert!(empty.status.success() && empty.stdout.is_empty());

    let mut smaller = written.clone();
    smaller["roles"] = json!([]);
    std::fs::write(&file, smaller.to_string()).unwrap();
    let refused = crate::binary::tessera(
        &["snapshot", "apply", file.to_str().unwrap()],
        &production.url,
    )
    .await;
    assert!(
        !refused.status.success(),
        "a destructive step without --allow-destructive"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("CONFLICT"));
    let out = crate::binary::tessera(&["snapshot", "export"], &production.url).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        written,
        "nothing changed"
    );
    let _ = std::fs::remove_dir_all(&dir);
    staging_app.db.destroy().await;
    production.destroy().await;
}

#[tokio::test]
async fn a_snapshot_removes_a_check_with_its_message_and_changes_a_default() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    staging(&app, &admin).await;
    let (mut snapshot, _) = exported(&app, &admin).await;
    let orders = snapshot["tables"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["name"] == "orders")
        .unwrap();
    let amount = orders["columns"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "amount")
        .unwrap();
    amount["check"] = Value::Null;
    amount["checkMessage"] = Value::Null;
    amount["default"] = json!("1.00");
    let diff = app
        .post(
            "/admin/api/snapshot/diff",
            &admin,
            json!({ "data": snapshot }),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    assert_eq!(diff.data()["destructive"], false);
    assert_eq!(
        diff.data()["steps"].as_array().unwrap().len(),
        1,
        "{:?}",
        diff.body
    );
    let applied = apply(&app, &admin, json!({ "snapshot": snapshot })).await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let (after, _) = exported(&app, &admin).await;
    let amount = after["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "orders")
        .and_then(|t| {
            t["columns"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "amount")
        })
        .unwrap()
        .clone();
    assert_eq!(amount["check"], Value::Null);
    assert_eq!(amount["checkMessage"], Value::Null);
    assert_eq!(amount["default"], "1.00");
    let again = app
        .post("/admin/api/snapshot/diff", &admin, json!({ "data": after }))
        .await;
    assert_eq!(again.data()["steps"], json!([]));
    app.db.destroy().await;
}

/// `POST /admin/api/snapshot/apply` with `body` as its `data`.
pub(crate) async fn apply(app: &TestApp, admin: &str, body: Value) -> Answer {
    app.post("/admin/api/snapshot/apply", admin, json!({ "data": body }))
        .await
}

/// A snapshot of `app`'s configuration as JSON.
pub(crate) async fn exported_json(app: &TestApp, admin: &str) -> Value {
    let answer = app.get("/admin/api/snapshot", admin).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer.data().clone()
}

pub(crate) async fn diff_of(app: &TestApp, admin: &str, snapshot: &Value) -> Vec<Value> {
    let diff = app
        .post(
            "/admin/api/snapshot/diff",
            admin,
            json!({ "data": snapshot }),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    diff.data()["steps"].as_array().unwrap().clone()
}

#[tokio::test]
async fn snapshot_diffs_show_values_and_mark_administrator_power() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let mut desired = exported_json(&app, &admin).await;
    // Control: an ordinary setting is shown with its values, unmarked.
    desired["settings"]["auth.session_ttl_hours"] = json!(12);
    let steps = diff_of(&app, &admin, &desired).await;
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["name"], "auth.session_ttl_hours");
    assert_eq!(steps[0]["new"], 12);
    assert!(steps[0]["old"].is_number(), "{steps:?}");
    assert!(steps[0].get("adminPower").is_none());
    // So is opening registration to the role new accounts get today.
    let mut opened = desired.clone();
    opened["settings"]["auth.registration_enabled"] = json!(true);
    let steps = diff_of(&app, &admin, &opened).await;
    assert!(
        steps.iter().all(|s| s.get("adminPower").is_none()),
        "{steps:?}"
    );
    // Anyone who registers would be an administrator: marked, and refused
    // without consent; a secret is shown redacted.
    desired["settings"]["auth.registration_role_id"] = json!("Administrators");
    desired["settings"]["auth.oauth"]["github"]["clientSecret"] = json!("very-secret");
    desired["settings"]["auth.oauth"]["github"]["trustEmail"] = json!(true);
    let steps = diff_of(&app, &admin, &desired).await;
    let role = steps
        .iter()
        .find(|s| s["name"] == "auth.registration_role_id")
        .expect("the role step");
    assert_eq!(role["adminPower"], true);
    assert_eq!(role["new"], "Administrators");
    let oauth = steps.iter().find(|s| s["name"] == "auth.oauth").unwrap();
    assert_eq!(oauth["new"]["github"]["clientSecret"], "[REDACTED]");
    // A provider's configuration decides who signs in as whom: marked too.
    assert_eq!(oauth["adminPower"], true);
    assert!(
        !serde_json::to_string(&steps)
            .unwrap()
            .contains("very-secret")
    );
    let refused = apply(&app, &admin, json!({ "snapshot": desired })).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.code(), "INVALID_PAYLOAD");
    assert_eq!(refused.body["errors"][0]["field"], "settings.auth.oauth");
    let applied = apply(
        &app,
        &admin,
        json!({ "snapshot": desired, "allowAdminPower": true }),
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    // Each diff is audited, and its secrets are not.
    let audit = app
        .get("/admin/api/audit?action=snapshot.diff", &admin)
        .await;
    let entries = audit.data().as_array().unwrap();
    assert_eq!(entries.len(), 3, "{:?}", audit.body);
    assert!(!audit.body.to_string().contains("very-secret"));
    // Trusting a provider's emails is named in the apply's audit, as a
    // settings change names it.
    let applies = app
        .get("/admin/api/audit?action=snapshot.apply", &admin)
        .await;
    assert_eq!(
        applies.data()[0]["details"]["trustEmail"],
        json!({ "github": true }),
        "{:?}",
        applies.body
    );
    // The role new accounts get has admin access now (registration off):
    // turning registration on is judged with it, and marked.
    let mut opened = desired.clone();
    opened["settings"]["auth.registration_enabled"] = json!(true);
    let steps = diff_of(&app, &admin, &opened).await;
    let registration = steps
        .iter()
        .find(|s| s["name"] == "auth.registration_enabled")
        .expect("the registration step");
    assert_eq!(registration["adminPower"], true, "{steps:?}");
    // A diff that is refused is audited too.
    let mut broken = desired.clone();
    broken["grants"] = json!([{ "role": "No such role", "action": "read", "resource": "app.x" }]);
    let failed = app
        .post(
            "/admin/api/snapshot/diff",
            &admin,
            json!({ "data": broken }),
        )
        .await;
    assert_eq!(failed.status, StatusCode::BAD_REQUEST, "{:?}", failed.body);
    let audit = app
        .get("/admin/api/audit?action=snapshot.diff", &admin)
        .await;
    assert_eq!(audit.data()[0]["details"], json!({ "failed": true }));
}

#[tokio::test]
async fn exports_hold_no_secret_and_applies_keep_the_targets() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    created(
        &app,
        &admin,
        "/admin/api/workflows",
        json!({ "slug": "notify", "name": "Notify",
            "trigger": { "type": "webhook", "method": "POST", "response": "async", "access": "authenticated" },
            "steps": [{ "id": "call", "type": "http", "method": "POST", "url": "https://hooks.example.com/x",
                        "signingSecret": "sign-me-please",
                        "headers": { "Authorization": "Bearer hook-token", "Accept": "application/json" } }] }),
    )
    .await;
    let snapshot = exported_json(&app, &admin).await;
    let text = snapshot.to_string();
    assert!(
        !text.contains("sign-me-please") && !text.contains("hook-token"),
        "{text}"
    );
    let step = &snapshot["workflows"][0]["draft"]["steps"][0];
    assert_eq!(step["signingSecret"], "[REDACTED]");
    assert_eq!(step["headers"]["Authorization"], "[REDACTED]");
    assert_eq!(step["headers"]["Accept"], "application/json");
    // Applied back with a change, the stored secrets stay.
    assert!(diff_of(&app, &admin, &snapshot).await.is_empty());
    let mut renamed = snapshot.clone();
    renamed["workflows"][0]["name"] = json!("Notify them");
    let applied = apply(&app, &admin, json!({ "snapshot": renamed })).await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let kept = app
        .db
        .sql("SELECT (draft #>> '{steps,0,signingSecret}') || ' ' || (draft #>> '{steps,0,headers,Authorization}') FROM svc.workflows WHERE slug = 'notify'")
        .await;
    assert_eq!(kept.as_deref(), Some("sign-me-please Bearer hook-token"));
    // An instance without that step has no value to keep.
    let fresh = spawn_app().await;
    let fresh_admin = fresh.admin_session().await;
    let refused = apply(&fresh, &fresh_admin, json!({ "snapshot": snapshot })).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    let field = refused.body["errors"][0]["field"].as_str().unwrap();
    assert!(
        field.starts_with("workflows[0].draft.steps.call."),
        "{field}"
    );
}

#[tokio::test]
async fn a_diff_that_would_drop_a_table_blocks_no_writer() {
    use sea_orm::{ConnectionTrait, TransactionTrait};
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    for name in ["orders", "items"] {
        created(
            &app,
            &admin,
            "/admin/api/schema/shop/tables",
            json!({ "name": name, "columns": [
                { "name": "id", "dataType": "bigint", "primaryKey": true },
                { "name": "qty", "dataType": "integer" } ] }),
        )
        .await;
    }
    let mut desired = exported_json(&app, &admin).await;
    // Drop orders, retype and index items: each would lock its table.
    desired["tables"] = json!(
        desired["tables"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "orders")
            .map(|t| {
                let mut t = t.clone();
                t["columns"][1]["dataType"] = json!("bigint");
                t["indexes"] = json!([{ "name": "items_qty_idx", "columns": ["qty"],
                                    "unique": false, "method": "btree" }]);
                t
            })
            .collect::<Vec<_>>()
    );
    desired["resources"] = json!(
        desired["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["table"] != "orders")
            .cloned()
            .collect::<Vec<_>>()
    );
    // A writer holds both tables in an open transaction.
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let writer = db.begin().await.unwrap();
    writer
        .execute_unprepared(
            "INSERT INTO shop.orders VALUES (1, 1); INSERT INTO shop.items VALUES (1, 1)",
        )
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let diff = app
        .post(
            "/admin/api/snapshot/diff",
            &admin,
            json!({ "data": desired }),
        )
        .await;
    assert_eq!(diff.status, StatusCode::OK, "{:?}", diff.body);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "the diff waited {:?}",
        started.elapsed()
    );
    let steps = diff.data()["steps"].as_array().unwrap();
    for sql in [
        "DROP TABLE \"shop\".\"orders\"",
        "TYPE BIGINT",
        "CREATE INDEX",
    ] {
        assert!(
            steps
                .iter()
                .any(|s| s["sql"].as_str().is_some_and(|q| q.contains(sql))),
            "{sql} in {steps:?}"
        );
    }
    writer.commit().await.unwrap();
    // While a diff runs, another session writes both tables without waiting.
    let during = tokio::spawn({
        let url = app.db.url.clone();
        async move {
            let db = sea_orm::Database::connect(&url).await.unwrap();
            for n in 2..40 {
                db.execute_unprepared(&format!(
                    "SET lock_timeout = '1s'; INSERT INTO shop.orders VALUES ({n}, 1); \
                     INSERT INTO shop.items VALUES ({n}, 1)"
                ))
                .await
                .unwrap();
            }
        }
    });
    for _ in 0..5 {
        let again = app
            .post(
                "/admin/api/snapshot/diff",
                &admin,
                json!({ "data": desired }),
            )
            .await;
        assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    }
    during.await.unwrap();
    // Nothing changed.
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM shop.orders")
            .await
            .as_deref(),
        Some("39")
    );
}

/// A diff changes no service row that exists: with a writer holding every
/// roles, settings, workflows, DataViews, dashboards, grants and resources
/// row (and the lock of the schema an administrator's change takes), a
/// diff that changes each of them answers at once with every step; the
/// same snapshot then applies.
#[tokio::test]
async fn a_diff_that_rewrites_service_rows_waits_for_no_writer_of_them() {
    use sea_orm::{ConnectionTrait, TransactionTrait};
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    staging(&app, &admin).await;
    let mut desired = exported_json(&app, &admin).await;
    let named = |list: &mut Value, key: &str, name: &str| -> usize {
        list.as_array()
            .unwrap()
            .iter()
            .position(|item| item[key] == name)
            .unwrap_or_else(|| panic!("{name} in {list}"))
    };
    let role = named(&mut desired["roles"], "name", "Editors");
    desired["roles"][role]["description"] = json!("Edits every order");
    desired["settings"]["auth.session_ttl_hours"] = json!(12);
    let workflow = named(&mut desired["workflows"], "slug", "intake");
    desired["workflows"][workflow]["name"] = json!("Order intake");
    let view = named(&mut desired["dataviews"], "slug", "per-state");
    desired["dataviews"][view]["name"] = json!("Orders per state");
    let dashboard = named(&mut desired["dashboards"], "slug", "sales");
    desired["dashboards"][dashboard]["name"] = json!("Sales by state");
    // The first grant goes; a new one names the same role and table,
    // whose rows the writer below holds.
    let mut grants = desired["grants"].as_array().unwrap()[1..].to_vec();
    let mut added = grants
        .iter()
        .find(|g| g["role"] == "Editors" && g["resource"] == "shop.orders")
        .cloned()
        .expect("the editors' grant on shop.orders");
    added["action"] = json!("delete");
    added["columns"] = Value::Null;
    grants.push(added);
    desired["grants"] = json!(grants);
    let table = named(&mut desired["tables"], "name", "orders");
    desired["tables"][table]["columns"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "note", "dataType": "text", "nullable": true }));
    let resource = named(&mut desired["resources"], "table", "orders");
    desired["resources"][resource]["exposedMethods"] = json!(["GET"]);

    let versions = "SELECT concat_ws(',', auth, catalog, settings) FROM svc.cache_version";
    let versions_before = app.db.sql(versions).await;
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let writer = db.begin().await.unwrap();
    writer
        .execute_unprepared(
            "SELECT pg_advisory_xact_lock(hashtext('tessera.schema:shop')); \
             SELECT 1 FROM svc.roles FOR UPDATE; SELECT 1 FROM svc.settings FOR UPDATE; \
             SELECT 1 FROM svc.workflows FOR UPDATE; SELECT 1 FROM svc.dataviews FOR UPDATE; \
             SELECT 1 FROM svc.dashboards FOR UPDATE; SELECT 1 FROM svc.grants FOR UPDATE; \
             SELECT 1 FROM svc.resources FOR UPDATE",
        )
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let steps = diff_of(&app, &admin, &desired).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "the diff waited {:?}",
        started.elapsed()
    );
    let kinds: Vec<String> = steps
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s["action"].as_str().unwrap(),
                s["kind"].as_str().unwrap()
            )
        })
        .collect();
    for kind in [
        "alter role",
        "alter setting",
        "alter workflow",
        "alter dataview",
        "alter dashboard",
        "drop grant",
        "create grant",
        "create column",
        "alter resource",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    writer.commit().await.unwrap();
    // Nothing changed, the shared-state versions included (no instance
    // drops its caches for a diff); the snapshot applies as the diff said.
    assert_eq!(app.db.sql(versions).await, versions_before);
    assert_eq!(
        app.db
            .sql("SELECT description FROM svc.roles WHERE name = 'Editors'")
            .await
            .as_deref(),
        Some("Edit orders")
    );
    let count = "SELECT count(*)::text FROM svc.grants";
    let before: usize = app.db.sql(count).await.unwrap().parse().unwrap();
    let applied = apply(
        &app,
        &admin,
        json!({ "snapshot": desired, "allowDestructive": true, "allowAdminPower": true }),
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    assert_eq!(
        app.db
            .sql("SELECT description FROM svc.roles WHERE name = 'Editors'")
            .await
            .as_deref(),
        Some("Edits every order")
    );
    // One grant dropped, one added.
    let after: usize = app.db.sql(count).await.unwrap().parse().unwrap();
    assert_eq!(after, before);
    assert_ne!(app.db.sql(versions).await, versions_before);
    db.close().await.unwrap();
}

/// Every foreign key of the service tables is deferrable (migration 0025
/// made those of its day so): a diff defers them so the rows it adds lock
/// nothing they name; a key added later without `DEFERRABLE` would bring
/// those locks back.
#[tokio::test]
async fn every_service_foreign_key_is_deferrable() {
    let app = spawn_app().await;
    let keys = "SELECT count(*)::text FROM pg_constraint c \
        JOIN pg_namespace n ON n.oid = c.connamespace WHERE c.contype = 'f' AND n.nspname = 'svc'";
    let total: usize = app.db.sql(keys).await.unwrap().parse().unwrap();
    assert!(total > 5, "{total} service foreign keys");
    let immediate = app.db.sql(&format!("{keys} AND NOT c.condeferrable")).await;
    assert_eq!(immediate.as_deref(), Some("0"));
}

/// What a role's or database's default could preset for the settings the
/// service's functions keep per transaction changes nothing: a change in
/// a session whose `tessera.dry_run` says "on" (the form diffs once used)
/// or names another transaction still moves the shared-state versions,
/// and a negative `tessera.answer_bytes` does not widen the ceiling.
#[tokio::test]
async fn preset_settings_switch_off_neither_version_bumps_nor_the_answer_ceiling() {
    use sea_orm::ConnectionTrait;
    let app = spawn_app().await;
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let version = "SELECT (auth + catalog + settings)::text FROM svc.cache_version";
    db.execute_unprepared(
        "INSERT INTO svc.roles (id, name, description) VALUES (gen_random_uuid(), 'Preset', '')",
    )
    .await
    .unwrap();
    for preset in ["on", "1"] {
        let before: i64 = app.db.sql(version).await.unwrap().parse().unwrap();
        // A session default is what a role's or database's default becomes.
        db.execute_unprepared(&format!(
            "SET tessera.dry_run = '{preset}'; \
             UPDATE svc.roles SET description = 'preset {preset}' WHERE name = 'Preset'"
        ))
        .await
        .unwrap();
        let after: i64 = app.db.sql(version).await.unwrap().parse().unwrap();
        assert!(after > before, "preset {preset}: {before} -> {after}");
    }
    // A control first: within the ceiling the piece passes.
    let piece = "SELECT svc.answer_piece(json_build_array(repeat('x', 100)), 0, 200)::text";
    db.execute_unprepared("SET tessera.answer_bytes = '-1000000'")
        .await
        .unwrap();
    let within = db
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            piece.replace("200", "1000"),
        ))
        .await;
    assert!(within.is_ok(), "{within:?}");
    let past = db
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            piece.replace("200", "50"),
        ))
        .await;
    let message = format!("{past:?}");
    assert!(message.contains("max_answer_bytes"), "{message}");
    db.close().await.unwrap();
}
