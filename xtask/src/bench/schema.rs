//! `cargo xtask bench schema`: export, diff and apply of a configuration of
//! 200 tables (2,000 columns), 50 roles, 2,000 grants and 50 workflows,
//! between two fresh databases, then the apply of the unchanged snapshot.

use std::fmt::Write as _;
use std::time::Instant;

use super::{ADMIN_EMAIL, fresh_server, request};
use crate::Result;

const TABLES: usize = 200;
const COLUMNS_PER_TABLE: usize = 10;
const ROLES: usize = 50;
const GRANTS_PER_ROLE: usize = 40;
const WORKFLOWS: usize = 50;
/// Target of export, diff and apply, in milliseconds.
const TARGET_MS: u128 = 2_000;
/// Target of an apply that changes nothing.
const UNCHANGED_TARGET_MS: u128 = 200;

/// The configuration as a snapshot document.
fn configuration() -> String {
    let types = [
        "text",
        "integer",
        "bigint",
        "boolean",
        "numeric(10,2)",
        "timestamp with time zone",
        "uuid",
        "jsonb",
        "text",
        "date",
    ];
    let mut tables = Vec::with_capacity(TABLES);
    let mut resources = Vec::with_capacity(TABLES);
    for t in 0..TABLES {
        let mut columns = String::from(
            r#"{"name":"id","dataType":"bigint","nullable":false,"identity":"ALWAYS","primaryKey":true}"#,
        );
        for (c, data_type) in types.iter().enumerate().take(COLUMNS_PER_TABLE).skip(1) {
            let _ = write!(
                columns,
                r#",{{"name":"c{c}","dataType":"{data_type}","nullable":{}}}"#,
                c % 3 != 0
            );
        }
        tables.push(format!(
            r#"{{"schema":"bench","name":"t{t:03}","columns":[{columns}],"indexes":[{{"name":"t{t:03}_c1_idx","columns":["c1"]}}]}}"#
        ));
        resources.push(format!(
            r#"{{"schema":"bench","table":"t{t:03}","exposedMethods":["GET","POST"]}}"#
        ));
    }
    let roles: Vec<String> = (0..ROLES)
        .map(|r| format!(r#"{{"name":"role{r:02}","description":"Role {r}","apiAccess":true}}"#))
        .collect();
    let mut grants = Vec::with_capacity(ROLES * GRANTS_PER_ROLE);
    for r in 0..ROLES {
        for g in 0..GRANTS_PER_ROLE {
            let table = (r * 7 + g * 5) % TABLES;
            let action = ["read", "create", "update", "delete"][g % 4];
            grants.push(format!(
                r#"{{"role":"role{r:02}","resource":"bench.t{table:03}","action":"{action}","filter":{{"c2":{{"gt":{g}}}}},"columns":null}}"#
            ));
        }
    }
    let workflows: Vec<String> = (0..WORKFLOWS)
        .map(|w| {
            let definition = format!(
                r#"{{"trigger":{{"type":"webhook","method":"POST","response":"sync","access":"public","executeAs":"{ADMIN_EMAIL}"}},"steps":[{{"id":"q","type":"query","resource":"bench.t{:03}","limit":10}},{{"id":"done","type":"finish","result":"{{{{steps.q.result}}}}"}}]}}"#,
                w % TABLES
            );
            format!(r#"{{"slug":"flow{w:02}","name":"Flow {w}","enabled":true,"draft":{definition},"published":{definition}}}"#)
        })
        .collect();
    format!(
        r#"{{"version":1,"tables":[{}],"resources":[{}],"roles":[{}],"grants":[{}],"workflows":[{}]}}"#,
        tables.join(","),
        resources.join(","),
        roles.join(","),
        grants.join(","),
        workflows.join(",")
    )
}

/// A timed request; fails unless 2xx.
fn timed(
    port: u16,
    method: &str,
    path: &str,
    admin: &str,
    body: Option<&str>,
) -> Result<(u128, String)> {
    let started = Instant::now();
    let (status, answer) = request(port, method, path, Some(admin), body)?;
    let ms = started.elapsed().as_millis();
    if (200..300).contains(&status) {
        Ok((ms, answer))
    } else {
        Err(format!(
            "{method} {path}: {status} {}",
            answer.chars().take(500).collect::<String>()
        ))
    }
}

/// The snapshot inside `{"data":…}`.
fn unwrapped(body: &str) -> &str {
    body.strip_prefix(r#"{"data":"#)
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or(body)
}

fn verdict(ms: u128, target: u128) -> &'static str {
    if ms <= target { "ok" } else { "OVER TARGET" }
}

/// Runs the benchmark.
pub fn schema() -> Result {
    let snapshot = configuration();
    let apply_body = |s: &str| format!(r#"{{"data":{{"snapshot":{s},"allowAdminPower":true}}}}"#);
    let (_staging, staging_port, _db, staging_admin) =
        fresh_server("tessera_bench_schema_staging")?;
    let (seeded, _) = timed(
        staging_port,
        "POST",
        "/admin/api/snapshot/apply",
        &staging_admin,
        Some(&apply_body(&snapshot)),
    )?;
    let mut exports = Vec::new();
    let mut exported = String::new();
    for _ in 0..3 {
        let (ms, body) = timed(
            staging_port,
            "GET",
            "/admin/api/snapshot",
            &staging_admin,
            None,
        )?;
        exports.push(ms);
        exported = unwrapped(&body).to_owned();
    }
    exports.sort_unstable();
    let (_production, port, _db, admin) = fresh_server("tessera_bench_schema_production")?;
    let (diff, answer) = timed(
        port,
        "POST",
        "/admin/api/snapshot/diff",
        &admin,
        Some(&format!(r#"{{"data":{exported}}}"#)),
    )?;
    let steps = answer.matches(r#""action":"#).count();
    let (apply, _) = timed(
        port,
        "POST",
        "/admin/api/snapshot/apply",
        &admin,
        Some(&apply_body(&exported)),
    )?;
    let mut unchanged = Vec::new();
    for _ in 0..3 {
        let (ms, answer) = timed(
            port,
            "POST",
            "/admin/api/snapshot/apply",
            &admin,
            Some(&apply_body(&exported)),
        )?;
        if !answer.contains(r#""steps":[]"#) {
            return Err(format!(
                "the second apply changed something: {}",
                answer.chars().take(300).collect::<String>()
            ));
        }
        unchanged.push(ms);
    }
    unchanged.sort_unstable();
    let (_, back) = timed(port, "GET", "/admin/api/snapshot", &admin, None)?;
    if unwrapped(&back) != exported {
        return Err("the production export differs from the staging export".into());
    }
    println!(
        "\nschema snapshot: {TABLES} tables, {} columns, {ROLES} roles, {} grants, {WORKFLOWS} workflows ({} KiB, {steps} steps)",
        TABLES * COLUMNS_PER_TABLE,
        ROLES * GRANTS_PER_ROLE,
        exported.len() / 1024
    );
    println!("{:<44} {:>8}", "operation", "ms");
    println!(
        "{:<44} {:>8}",
        "apply to a fresh database (staging seed)", seeded
    );
    println!(
        "{:<44} {:>8}  {}",
        "export (median of 3)",
        exports[1],
        verdict(exports[1], TARGET_MS)
    );
    println!(
        "{:<44} {:>8}  {}",
        "diff against a fresh database",
        diff,
        verdict(diff, TARGET_MS)
    );
    println!(
        "{:<44} {:>8}  {}",
        "apply to a fresh database",
        apply,
        verdict(apply, TARGET_MS)
    );
    println!(
        "{:<44} {:>8}  {}",
        "apply unchanged (median of 3)",
        unchanged[1],
        verdict(unchanged[1], UNCHANGED_TARGET_MS)
    );
    println!("the production export is byte-identical to staging's");
    Ok(())
}
