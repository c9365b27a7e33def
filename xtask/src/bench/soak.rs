//! `cargo xtask soak --minutes N`: a mixed load (list reads, row writes,
//! sign-ins, sync webhooks, file uploads) at half the measured capacity for
//! N minutes, in one-minute rounds; prints requests, errors, p99 and the
//! server's resident memory each round, and fails when memory does not stay
//! flat or any answer is an error.

use std::path::Path;
use std::process::Command;

use super::{
    ADMIN_EMAIL, ADMIN_PASSWORD, Result, expose, fresh_server, json_string, memory_mb, post,
    settings, token, user_id,
};

/// Connections of the capacity probe and of the soak.
const CONNECTIONS: u32 = 16;
/// Resident memory may end at most this much above where the soak started.
const RSS_GROWTH_MAX: f64 = 1.10;
/// ... plus this many MB (allocator and pool warm-up).
const RSS_SLACK_MB: f64 = 10.0;

/// The wrk script: one request of the mix per call, in a fixed rotation of
/// 20 (12 reads, 4 writes, 2 webhooks, 1 sign-in, 1 upload), paced by
/// `delay_ms` (0: as fast as possible).
fn script(token: &str, delay_ms: u64) -> String {
    let upload = format!(
        "--b\\r\\nContent-Disposition: form-data; name=\\\"file\\\"; filename=\\\"a.txt\\\"\\r\\nContent-Type: text/plain\\r\\n\\r\\n{}\\r\\n--b--\\r\\n",
        "x".repeat(4096)
    );
    format!(
        r#"local i = 0
local auth = {{ ["Authorization"] = "Bearer {token}", ["Content-Type"] = "application/json" }}
local upload = {{ ["Authorization"] = "Bearer {token}", ["Content-Type"] = "multipart/form-data; boundary=b" }}
local json = {{ ["Content-Type"] = "application/json" }}
request = function()
  i = i + 1
  local k = i % 20
  if k == 0 then
    return wrk.format("POST", "/api/auth/login", json, '{{"email":"{ADMIN_EMAIL}","password":"{ADMIN_PASSWORD}"}}')
  elseif k == 1 or k == 6 or k == 11 or k == 16 then
    return wrk.format("POST", "/api/data/app/soak", auth, '{{"data":{{"title":"soak"}}}}')
  elseif k == 2 or k == 12 then
    return wrk.format("POST", "/api/workflows/echo/webhook", json, '{{"name":"soak"}}')
  elseif k == 3 then
    return wrk.format("POST", "/api/files", upload, "{upload}")
  else
    return wrk.format("GET", "/api/data/app/soak?sort=-id&limit=20", auth)
  end
end
delay = function() return {delay_ms} end
"#
    )
}

/// What one wrk run counted.
struct Round {
    requests: u64,
    errors: u64,
    rps: f64,
    p99: String,
}

/// Runs `script` with wrk for `duration`.
fn round(port: u16, script: &Path, duration: &str) -> Result<Round> {
    let connections = CONNECTIONS.to_string();
    let out = Command::new("wrk")
        .args([
            "-t",
            "2",
            "-c",
            &connections,
            "-d",
            duration,
            "--latency",
            "-s",
        ])
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}"))
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let number_after = |prefix: &str| -> u64 {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.trim_start()[prefix.len()..].split_whitespace().next())
            .and_then(|n| n.trim_end_matches(',').parse().ok())
            .unwrap_or(0)
    };
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or(format!("wrk printed no count: {text}"))?;
    // "Socket errors: connect 0, read 0, write 0, timeout 0"
    let socket: u64 = text
        .lines()
        .find(|l| l.contains("Socket errors:"))
        .map(|l| {
            l.split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let p99 = text
        .lines()
        .find(|l| l.trim_start().starts_with("99%"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("-")
        .to_owned();
    let rps = text
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    Ok(Round {
        requests,
        errors: number_after("Non-2xx or 3xx responses:") + socket,
        rps,
        p99,
    })
}

/// `cargo xtask soak --minutes N`.
pub fn soak(minutes: u64) -> Result {
    let (server, port, database, admin) = fresh_server("tessera_soak")?;
    let me = user_id(port, &admin)?;
    settings(
        port,
        &admin,
        r#"{"workflows.public_rate_limit_per_minute":1000000,"auth.login_rate_limit_per_minute":0}"#,
    )?;
    let table = post(
        port,
        "/admin/api/schema/app/tables",
        &admin,
        r#"{"name":"soak","columns":[{"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},{"name":"title","dataType":"text"}]}"#,
    )?;
    let resource = json_string(&table, "resourceId").ok_or(format!("no resource: {table}"))?;
    expose(port, &admin, &resource, r#"["GET","POST"]"#)?;
    let created = post(
        port,
        "/admin/api/workflows",
        &admin,
        &format!(
            r#"{{"slug":"echo","trigger":{{"type":"webhook","access":"public","executeAs":"{me}"}},
            "steps":[{{"id":"greet","type":"transform","output":{{"hello":"{{{{start.data.body.name}}}}"}}}},{{"id":"done","type":"finish","result":"{{{{steps.greet.result}}}}"}}]}}"#
        ),
    )?;
    let workflow = json_string(&created, "id").ok_or(format!("no workflow: {created}"))?;
    post(
        port,
        &format!("/admin/api/workflows/{workflow}/publish"),
        &admin,
        "null",
    )?;
    let token = token(port, &admin, "API")?;

    let dir = std::env::temp_dir().join(format!("tessera-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let fast = dir.join("fast.lua");
    std::fs::write(&fast, script(&token, 0)).map_err(|e| e.to_string())?;
    let capacity = round(port, &fast, "10s")?;
    if capacity.errors > 0 {
        return Err(format!(
            "{} errors while measuring capacity",
            capacity.errors
        ));
    }
    // Each connection waits so that all together send half the capacity.
    let delay_ms = (f64::from(CONNECTIONS) * 1000.0 / (capacity.rps / 2.0)).round() as u64;
    let paced = dir.join("paced.lua");
    std::fs::write(&paced, script(&token, delay_ms)).map_err(|e| e.to_string())?;
    let pid = server.0.id();
    let start_rss = memory_mb(pid, "VmRSS");
    println!(
        "\nsoak: capacity {:.0} req/s of the mix, soaking at about half ({delay_ms} ms between requests on each of {CONNECTIONS} connections) for {minutes} min",
        capacity.rps
    );
    println!(
        "{:>6} {:>10} {:>8} {:>8} {:>10} {:>8}",
        "minute", "requests", "req/s", "errors", "p99", "RSS MB"
    );
    println!(
        "{:>6} {:>10} {:>8} {:>8} {:>10} {start_rss:>8.1}",
        0, "-", "-", "-", "-"
    );
    let (mut requests, mut errors) = (0, 0);
    let mut end_rss = start_rss;
    for minute in 1..=minutes {
        let r = round(port, &paced, "60s")?;
        end_rss = memory_mb(pid, "VmRSS");
        requests += r.requests;
        errors += r.errors;
        println!(
            "{minute:>6} {:>10} {:>8.0} {:>8} {:>10} {end_rss:>8.1}",
            r.requests, r.rps, r.errors, r.p99
        );
    }
    let rows = super::psql_value(&database, "SELECT count(*) FROM app.soak")?;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "soak: {requests} requests, {errors} errors, RSS {start_rss:.1} MB -> {end_rss:.1} MB (peak {:.1} MB), {rows} rows written",
        memory_mb(pid, "VmHWM")
    );
    if errors > 0 {
        return Err(format!("{errors} requests failed"));
    }
    if end_rss > start_rss * RSS_GROWTH_MAX + RSS_SLACK_MB {
        return Err(format!(
            "resident memory grew from {start_rss:.1} MB to {end_rss:.1} MB"
        ));
    }
    Ok(())
}
