//! The targets of `cargo xtask bench workflows` for API.md 15, each with its
//! reference in the same run: the public sync echo against pgbench running
//! the statements the route runs (the webhook lookup with the rate limit and
//! the finished run's INSERT, read from the store's source so they cannot
//! drift) over 16 and 1 clients; 50 schedules ticking every second on two
//! instances; row events at 1,000 inserts/s; a forEach over 1,000 items.

use std::process::Command;
use std::time::{Duration, Instant};

use super::{
    WORKFLOW_DURATION, json_string, millis, patch, pgbench_with, post, print_header, print_row,
    psql, psql_value, publish_workflow, request, start_server_with, webhook_server, wrk_with,
};
use crate::Result;

/// The workflow store's definitions and runs, whose statements pgbench
/// runs.
const STORE: &str = concat!(
    include_str!("../../../crates/adapters/store-pg/src/workflow_store/definitions.rs"),
    include_str!("../../../crates/adapters/store-pg/src/workflow_store/runs.rs"),
);
/// Schedules ticking at once.
const SCHEDULES: usize = 50;
/// How long the schedules tick, and the row events arrive.
const LOAD_SECONDS: u64 = 60;
/// Row events per second.
const EVENT_RATE: &str = "1000";
/// Items of the loop.
const ITEMS: usize = 1000;

pub(super) fn flows() -> Result {
    let (_server, port, database, admin, me) = webhook_server("tessera_bench_flows")?;
    echo_against_pgbench(port, &database, &admin, &me)?;
    for_each(port, &database, &admin, &me)?;
    let (_second, _) = start_server_with(&database, &[])?;
    schedules(port, &database, &admin, &me)?;
    row_events(port, &database, &admin, &me)
}

/// The public sync echo against pgbench alone (`cargo xtask bench echo`),
/// for runs that alternate builds.
pub(super) fn echo() -> Result {
    let (_server, port, database, admin, me) = webhook_server("tessera_bench_flows")?;
    echo_against_pgbench(port, &database, &admin, &me)
}

/// The content of the Rust string literal that starts with `prefix` and
/// holds `marker`, its line continuations and escapes undone.
fn literal(prefix: &str, marker: &str) -> Result<String> {
    for (at, _) in STORE.match_indices(&format!("\"{prefix}")) {
        let mut text = String::new();
        let mut chars = STORE[at + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('\n') => {
                        while chars.peek().is_some_and(|c| c.is_whitespace()) {
                            chars.next();
                        }
                    }
                    Some(other) => text.push(other),
                    None => {}
                },
                c => text.push(c),
            }
        }
        if text.contains(marker) {
            return Ok(text);
        }
    }
    Err(format!(
        "no statement `{prefix}…{marker}` in the workflow store"
    ))
}

/// `sql` with `$1`, `$2`… replaced by `values`.
fn bound(sql: &str, values: &[&str]) -> String {
    let mut sql = sql.to_owned();
    for (i, value) in values.iter().enumerate().rev() {
        sql = sql.replace(&format!("${}", i + 1), value);
    }
    sql
}

/// A dollar-quoted text literal.
fn quoted(text: &str) -> String {
    format!("$q${text}$q$")
}

/// The public sync echo at 16 and 1 connections, against pgbench running
/// the route's two statements with the same values.
fn echo_against_pgbench(port: u16, database: &str, admin: &str, me: &str) -> Result {
    let steps = r#"[{"id":"greet","type":"transform","output":{"hello":"{{start.data.body.name}}"}},
        {"id":"done","type":"finish","result":"{{steps.greet.result}}"}]"#;
    let id = publish_workflow(
        port,
        admin,
        "echo27",
        &format!(r#"{{"type":"webhook","access":"public","executeAs":"{me}"}}"#),
        steps,
    )?;
    let path = "/api/workflows/echo27/webhook";
    let (status, body) = request(port, "POST", path, None, Some(r#"{"name":"bench"}"#))?;
    if status != 200 {
        return Err(format!("the echo answered {status}: {body}"));
    }
    let definition = psql_value(
        database,
        &format!("SELECT published FROM svc.workflows WHERE id = '{id}'"),
    )?;
    let (input, run_steps) = psql_value(
        database,
        &format!("SELECT input::text || E'\\t' || steps::text FROM svc.workflow_runs WHERE workflow_id = '{id}' LIMIT 1"),
    )?
    .split_once('\t')
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .ok_or("no stored echo run")?;
    let lookup = bound(
        &literal("WITH w AS (", "take_rate")?,
        &[
            "'echo27'",
            "'POST'",
            "'127.0.0.1'",
            "'public'",
            "'public'",
            "'POST'",
            "'workflows.public_rate_limit_per_minute'",
            "60",
        ],
    );
    let record = bound(
        &literal("INSERT INTO svc.workflow_runs (id,", "finished_at) VALUES")?,
        &[
            "gen_random_uuid()",
            &format!("'{id}'"),
            "'SUCCEEDED'",
            "false",
            &format!("{}::jsonb", quoted(&definition)),
            &format!("{}::jsonb", quoted(&input)),
            &format!("'{me}'"),
            "NULL",
            r#"'{"hello":"bench"}'::jsonb"#,
            "NULL",
            &format!("{}::jsonb", quoted(&run_steps)),
        ],
    );
    let dir = std::env::temp_dir().join(format!("tessera-bench-flows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("echo.sql");
    std::fs::write(&script, format!("{lookup};\n{record};\n")).map_err(|e| e.to_string())?;
    let call = dir.join("call.lua");
    std::fs::write(
        &call,
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = '{\"name\":\"bench\"}'\n",
    )
    .map_err(|e| e.to_string())?;
    let seconds = WORKFLOW_DURATION.trim_end_matches('s');
    print_header(WORKFLOW_DURATION);
    wrk_with(port, path, "", "3s", Some(&call), "2", "16")?;
    let sixteen = wrk_with(port, path, "", WORKFLOW_DURATION, Some(&call), "2", "16")?;
    print_row("public sync echo, 16 connections", &sixteen);
    let one = wrk_with(port, path, "", WORKFLOW_DURATION, Some(&call), "1", "1")?;
    print_row("public sync echo, 1 connection", &one);
    let tps16 = pgbench_with(database, &script, seconds, "16")?;
    let tps1 = pgbench_with(database, &script, seconds, "1")?;
    let rps16: f64 = sixteen.0.parse().unwrap_or(0.0);
    // One client waits for each transaction: its mean latency is 1/tps.
    let statements_ms = 1000.0 / tps1;
    let route_ms = millis(&one.1);
    println!(
        "pgbench, the route's lookup and INSERT: {tps16:.0} tps at 16 clients, {tps1:.0} tps at 1 \
         -> the echo at 16 connections is {:.0}% of pgbench (target >= 60%); at 1 connection the \
         route's p50 {route_ms:.2} ms less pgbench's {statements_ms:.2} ms: the server's share \
         {:.2} ms (target <= 0.35 ms)",
        100.0 * rps16 / tps16,
        route_ms - statements_ms
    );
    Ok(())
}

/// A loop over 1,000 items with a transform, through a public sync
/// webhook: the whole run's time as stored, and the call's.
fn for_each(port: u16, database: &str, admin: &str, me: &str) -> Result {
    let steps = r#"[{"id":"each","type":"forEach","items":"{{start.data.body.items}}","steps":[
        {"id":"double","type":"transform","output":{"n":"{{item}}","at":"{{index}}"}}]},
        {"id":"done","type":"finish","result":"{{steps.each.result}}"}]"#;
    let id = publish_workflow(
        port,
        admin,
        "loop27",
        &format!(r#"{{"type":"webhook","access":"public","executeAs":"{me}"}}"#),
        steps,
    )?;
    let items: Vec<String> = (0..ITEMS).map(|i| i.to_string()).collect();
    let body = format!(r#"{{"items":[{}]}}"#, items.join(","));
    let mut calls = Vec::new();
    for _ in 0..21 {
        let began = Instant::now();
        let (status, answer) = request(
            port,
            "POST",
            "/api/workflows/loop27/webhook",
            None,
            Some(&body),
        )?;
        calls.push(began.elapsed());
        if status != 200 || !answer.contains(&format!("\"at\":{}", ITEMS - 1)) {
            return Err(format!(
                "the loop answered {status}: {}",
                &answer[..answer.len().min(300)]
            ));
        }
    }
    calls.sort();
    let runs = psql_value(
        database,
        &format!(
            "SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) * 1000)::numeric, 1) \
             FROM svc.workflow_runs WHERE workflow_id = '{id}'"
        ),
    )?;
    println!(
        "forEach over {ITEMS} items with a transform: the run {runs} ms (median of 21, started to finished as stored), \
         the call {:.1} ms (median) (target < 100 ms)",
        calls[calls.len() / 2].as_secs_f64() * 1000.0
    );
    Ok(())
}

/// [`SCHEDULES`] workflows on `*/1 * * * * *` for [`LOAD_SECONDS`] on two
/// instances: runs per tick and the delay of each start after its tick.
fn schedules(port: u16, database: &str, admin: &str, me: &str) -> Result {
    let trigger = format!(r#"{{"type":"schedule","cron":"*/1 * * * * *","executeAs":"{me}"}}"#);
    let mut ids = Vec::new();
    for n in 0..SCHEDULES {
        ids.push(publish_workflow(
            port,
            admin,
            &format!("tick{n}"),
            &trigger,
            r#"[{"id":"f","type":"finish","result":"{{start.data.scheduledAt}}"}]"#,
        )?);
    }
    std::thread::sleep(Duration::from_secs(LOAD_SECONDS));
    for id in &ids {
        patch(
            port,
            &format!("/admin/api/workflows/{id}"),
            admin,
            r#"{"enabled":false}"#,
        )?;
    }
    std::thread::sleep(Duration::from_secs(2));
    let figures = psql_value(
        database,
        "WITH per AS (SELECT workflow_id, count(*) AS runs, count(DISTINCT scheduled_at) AS ticks, \
           extract(epoch FROM max(scheduled_at) - min(scheduled_at))::bigint + 1 AS span \
           FROM svc.workflow_runs WHERE scheduled_at IS NOT NULL GROUP BY workflow_id) \
         SELECT (SELECT sum(runs) FROM per) || ' runs, ' || (SELECT sum(runs - ticks) FROM per) || ' twice, ' || \
           (SELECT sum(span - ticks) FROM per) || ' skipped, start delay p50 ' || \
           (SELECT round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at)) * 1000)::numeric, 1) \
            FROM svc.workflow_runs WHERE scheduled_at IS NOT NULL) || ' ms, p99 ' || \
           (SELECT round((percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at)) * 1000)::numeric, 1) \
            FROM svc.workflow_runs WHERE scheduled_at IS NOT NULL) || ' ms'",
    )?;
    println!(
        "{SCHEDULES} schedules every second for {LOAD_SECONDS} s on two instances: {figures} \
         (target: each tick once, p99 < 250 ms)"
    );
    Ok(())
}

/// Inserts at [`EVENT_RATE`] per second for [`LOAD_SECONDS`] into a
/// watched table: runs started, and the backlog 5 s after the load.
fn row_events(port: u16, database: &str, admin: &str, me: &str) -> Result {
    psql(
        database,
        "CREATE TABLE public.bench_events (id bigserial PRIMARY KEY, n int NOT NULL)",
    )?;
    let made = post(
        port,
        "/admin/api/resources",
        admin,
        r#"{"schema":"public","table":"bench_events"}"#,
    )?;
    let resource = json_string(&made, "id").ok_or(format!("no resource: {made}"))?;
    let id = publish_workflow(
        port,
        admin,
        "on-insert",
        &format!(
            r#"{{"type":"dbEvent","resourceId":"{resource}","events":["insert"],"executeAs":"{me}"}}"#
        ),
        r#"[{"id":"t","type":"transform","output":"{{start.data.new.n}}"},{"id":"f","type":"finish","result":"{{steps.t.result}}"}]"#,
    )?;
    let dir = std::env::temp_dir().join(format!("tessera-bench-flows-{}", std::process::id()));
    let script = dir.join("insert.sql");
    std::fs::write(&script, "INSERT INTO public.bench_events (n) VALUES (1);\n")
        .map_err(|e| e.to_string())?;
    let out = Command::new("pgbench")
        .args([
            "-n",
            "-c",
            "4",
            "-j",
            "2",
            "-R",
            EVENT_RATE,
            "-T",
            &LOAD_SECONDS.to_string(),
            "-f",
        ])
        .arg(&script)
        .arg(database)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "pgbench failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::thread::sleep(Duration::from_secs(5));
    let figures = psql_value(
        database,
        &format!(
            "SELECT (SELECT count(*) FROM public.bench_events) || ' inserts, ' || \
             (SELECT count(*) FROM svc.workflow_runs WHERE workflow_id = '{id}') || ' runs, ' || \
             (SELECT count(*) FROM svc.workflow_runs WHERE workflow_id = '{id}' AND status <> 'SUCCEEDED') || ' not succeeded, ' || \
             (SELECT count(*) FROM svc.row_events) || ' events left'"
        ),
    )?;
    println!(
        "row events at {EVENT_RATE}/s for {LOAD_SECONDS} s, 5 s after the load: {figures} \
         (target: one run per insert, nothing left)"
    );
    Ok(())
}
