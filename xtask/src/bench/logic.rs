//! The targets of `cargo xtask bench logic` for API.md 18, each with its
//! reference in the same run: `GET /api/rpc` of a stable SQL function
//! returning 100 rows against pgbench (`-M prepared`) running
//! `SELECT * FROM` the function on as many connections; and a sync webhook
//! whose step is a script (the sum of 100 numbers) against the same webhook
//! with a transform, at 16 connections and at one; and POST of one row
//! into a table with one write hook (a script setting a total) against the
//! same POST into a twin table without hooks.

use super::{
    WORKFLOW_DURATION, millis, patch, pgbench_with, post, print_header, print_row, psql,
    publish_workflow, request, token, webhook_server, wrk_with,
};
use crate::Result;

/// The function's table and the function.
const SCHEMA: &str = "CREATE SCHEMA shop; \
    CREATE TABLE shop.items (id integer PRIMARY KEY, name text NOT NULL, price numeric NOT NULL); \
    INSERT INTO shop.items SELECT i, 'item ' || i, i * 1.5 FROM generate_series(1, 1000) AS i; \
    CREATE FUNCTION shop.items_from(low integer) RETURNS SETOF shop.items LANGUAGE sql STABLE AS \
      $$ SELECT * FROM shop.items WHERE id >= low ORDER BY id LIMIT 100 $$";

pub(super) fn logic() -> Result {
    let (_server, port, database, admin, me) = webhook_server("tessera_bench_logic")?;
    rpc_against_pgbench(port, &database, &admin)?;
    script_against_transform(port, &admin, &me)?;
    hooked_against_plain(port, &admin)
}

/// POST of one row at 16 connections with an API token into `app.plain`
/// and into `app.hooked`, whose hook's script computes the row's total.
fn hooked_against_plain(port: u16, admin: &str) -> Result {
    let columns = r#"[{"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},
        {"name":"quantity","dataType":"integer","nullable":false},
        {"name":"price","dataType":"numeric","nullable":false},
        {"name":"total","dataType":"numeric"}]"#;
    let mut resources = Vec::new();
    for name in ["plain", "hooked"] {
        let table = post(
            port,
            "/admin/api/schema/app/tables",
            admin,
            &format!(r#"{{"name":"{name}","columns":{columns}}}"#),
        )?;
        let resource =
            super::json_string(&table, "resourceId").ok_or(format!("no resource: {table}"))?;
        super::expose(port, admin, &resource, r#"["GET","POST"]"#)?;
        resources.push(resource);
    }
    let trigger = format!(
        r#"{{"type":"beforeWrite","resourceId":"{}","events":["insert"]}}"#,
        resources[1]
    );
    let steps = r#"[{"id":"s","type":"script","code":"export default ({ start }) => ({ total: start.data.new.quantity * start.data.new.price })"},
        {"id":"done","type":"finish","result":"{{steps.s.result}}"}]"#;
    publish_workflow(port, admin, "hooked-total", &trigger, steps)?;
    let api = token(port, admin, "API")?;
    let row = r#"{"data":{"quantity":3,"price":2.5}}"#;
    let (status, answer) = request(port, "POST", "/api/data/app/hooked", Some(&api), Some(row))?;
    if status != 201 || !answer.contains("7.5") {
        return Err(format!("the hooked insert answered {status}: {answer}"));
    }
    let insert = post_script("insert.lua", row)?;
    let mut measured = Vec::new();
    for name in ["plain", "hooked"] {
        let path = format!("/api/data/app/{name}");
        wrk_with(port, &path, &api, "3s", Some(&insert), "2", "16")?;
        let sixteen = wrk_with(
            port,
            &path,
            &api,
            WORKFLOW_DURATION,
            Some(&insert),
            "2",
            "16",
        )?;
        print_row(
            &format!("POST /api/data/app/{name}, 16 connections"),
            &sixteen,
        );
        measured.push(sixteen);
    }
    let rps = |m: &super::Measured| m.0.parse::<f64>().unwrap_or(0.0);
    println!(
        "POST through one hook with a script step is {:.0}% of POST without hooks (target >= 50%)",
        100.0 * rps(&measured[1]) / rps(&measured[0]),
    );
    Ok(())
}

/// The benchmark's own temporary folder.
fn scratch() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("tessera-bench-logic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// A wrk script `name` that POSTs `body` as JSON.
fn post_script(name: &str, body: &str) -> Result<std::path::PathBuf> {
    let path = scratch()?.join(name);
    std::fs::write(
        &path,
        format!("wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = '{body}'\n"),
    )
    .map_err(|e| e.to_string())?;
    Ok(path)
}

/// `GET /api/rpc/shop/items_from?low=1` (100 rows) at 16 connections with
/// an API token, and pgbench running the function alone.
fn rpc_against_pgbench(port: u16, database: &str, admin: &str) -> Result {
    psql(database, SCHEMA)?;
    let created = post(
        port,
        "/admin/api/resources",
        admin,
        r#"{"schema":"shop","function":"items_from"}"#,
    )?;
    let id = super::json_string(&created, "id").ok_or(format!("no function id: {created}"))?;
    patch(
        port,
        &format!("/admin/api/resources/{id}"),
        admin,
        r#"{"exposedMethods":["GET","POST"]}"#,
    )?;
    let api = token(port, admin, "API")?;
    let path = "/api/rpc/shop/items_from?low=1";
    let (status, body) = request(port, "GET", path, Some(&api), None)?;
    if status != 200 || body.matches("\"id\"").count() != 100 {
        return Err(format!("the call answered {status}: {body:.200}"));
    }
    let dir = scratch()?;
    let script = dir.join("rpc.sql");
    std::fs::write(&script, "SELECT * FROM shop.items_from(1);\n").map_err(|e| e.to_string())?;
    let seconds = WORKFLOW_DURATION.trim_end_matches('s');
    print_header(WORKFLOW_DURATION);
    wrk_with(port, path, &api, "3s", None, "2", "16")?;
    let call = wrk_with(port, path, &api, WORKFLOW_DURATION, None, "2", "16")?;
    print_row(
        "GET /api/rpc of a stable function, 100 rows, 16 connections",
        &call,
    );
    let tps = pgbench_with(database, &script, seconds, "16")?;
    let rps: f64 = call.0.parse().unwrap_or(0.0);
    println!(
        "pgbench -M prepared, SELECT * FROM shop.items_from(1): {tps:.0} tps at 16 clients \
         -> the call is {:.0}% of pgbench (target >= 70%)",
        100.0 * rps / tps
    );
    // What the route's statement costs PostgreSQL: the same rows as one
    // JSON text, as the call answers them.
    let as_json = dir.join("rpc-json.sql");
    std::fs::write(
        &as_json,
        "SELECT coalesce(json_agg(r), '[]')::text FROM shop.items_from(1) AS r;\n",
    )
    .map_err(|e| e.to_string())?;
    let json_tps = pgbench_with(database, &as_json, seconds, "16")?;
    println!(
        "pgbench -M prepared, the same rows as the call's JSON text: {json_tps:.0} tps at 16 clients \
         -> the call is {:.0}% of it",
        100.0 * rps / json_tps
    );
    Ok(())
}

/// The sum of 100 numbers as a script step and as a transform, each in a
/// public sync webhook, at 16 connections and at one.
fn script_against_transform(port: u16, admin: &str, me: &str) -> Result {
    let trigger = format!(r#"{{"type":"webhook","access":"public","executeAs":"{me}"}}"#);
    let script = r#"[{"id":"sum","type":"script","code":"export default (ctx) => ctx.start.data.body.numbers.reduce((a, b) => a + b, 0)"},
        {"id":"done","type":"finish","result":"{{steps.sum.result}}"}]"#;
    let transform = r#"[{"id":"sum","type":"transform","output":{"numbers":"{{start.data.body.numbers}}"}},
        {"id":"done","type":"finish","result":"{{steps.sum.result}}"}]"#;
    publish_workflow(port, admin, "sum-script", &trigger, script)?;
    publish_workflow(port, admin, "sum-transform", &trigger, transform)?;
    let numbers: Vec<String> = (1..=100).map(|n| n.to_string()).collect();
    let body = format!(r#"{{"numbers":[{}]}}"#, numbers.join(","));
    let (status, answer) = request(
        port,
        "POST",
        "/api/workflows/sum-script/webhook",
        None,
        Some(&body),
    )?;
    if status != 200 || !answer.contains("5050") {
        return Err(format!("the script webhook answered {status}: {answer}"));
    }
    let call = post_script("sum.lua", &body)?;
    let mut measured = Vec::new();
    for slug in ["sum-transform", "sum-script"] {
        let path = format!("/api/workflows/{slug}/webhook");
        wrk_with(port, &path, "", "3s", Some(&call), "2", "16")?;
        let sixteen = wrk_with(port, &path, "", WORKFLOW_DURATION, Some(&call), "2", "16")?;
        print_row(&format!("{slug}, 16 connections"), &sixteen);
        let one = wrk_with(port, &path, "", WORKFLOW_DURATION, Some(&call), "1", "1")?;
        print_row(&format!("{slug}, 1 connection"), &one);
        measured.push((sixteen, one));
    }
    let rps = |m: &super::Measured| m.0.parse::<f64>().unwrap_or(0.0);
    let (transform, script) = (&measured[0], &measured[1]);
    println!(
        "the script webhook is {:.0}% of the transform one at 16 connections (target >= 50%); \
         p50 at 1 connection {:.2} ms against {:.2} ms: {:+.2} ms (target within 0.5 ms)",
        100.0 * rps(&script.0) / rps(&transform.0),
        millis(&script.1.1),
        millis(&transform.1.1),
        millis(&script.1.1) - millis(&transform.1.1),
    );
    Ok(())
}
