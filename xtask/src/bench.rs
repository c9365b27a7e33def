//! `cargo xtask bench auth|data|related|views|workflows|files|realtime|console|schema|replicas|pooler`: the
//! credential resolver, the Data API, DataViews, workflows, files and
//! realtime under load, measured with wrk (curl for files) against a release
//! build, and the console's weight and first load in Chromium; the Data
//! API's list route and a DataView are compared with pgbench running the
//! same SQL, files with `cp` on the same disk.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use crate::{Result, cargo, ensure_tool, pg, run};

const CONNECTIONS: &str = "16";
const THREADS: &str = "2";
const DURATION: &str = "10s";
/// The sign-in storm's length.
const STORM_DURATION: &str = "20s";
/// The Data API runs are longer, as the issue asks.
const DATA_DURATION: &str = "20s";
/// How long each workflow scenario runs.
const WORKFLOW_DURATION: &str = "10s";
/// Rows loaded for the Data API benchmark.
const DATA_ROWS: u32 = 100_000;
const ADMIN_EMAIL: &str = "bench@example.com";
const ADMIN_PASSWORD: &str = "bench-password-1";

mod compare;
mod console;
mod flows;
mod logic;
mod pooler;
mod realtime;
mod related;
mod replicas;
mod scale;
mod schema;
mod soak;

pub use soak::soak;

/// Runs the named benchmark suite.
pub fn suite(name: Option<&str>) -> Result {
    match name {
        Some("auth") => auth(),
        Some("data") => data().and_then(|()| related::related()),
        Some("rows") => data(),
        Some("compare") => compare::compare(),
        Some("related") => related::related(),
        Some("replicas") => replicas::replicas(),
        Some("peer") => peer_only(),
        Some("workflows") => workflows().and_then(|()| flows::flows()),
        Some("webhooks") => workflows(),
        Some("echo") => flows::echo(),
        Some("views") => views(),
        Some("files") => files(),
        Some("scale") => scale::scale(),
        Some("realtime") => realtime::realtime(),
        Some("console") => console::console(),
        Some("schema") => schema::schema(),
        Some("client") => client(),
        Some("logic") => logic::logic(),
        Some("pooler") => pooler::pooler(),
        None => auth()
            .and_then(|()| data())
            .and_then(|()| related::related())
            .and_then(|()| views())
            .and_then(|()| workflows())
            .and_then(|()| flows::flows())
            .and_then(|()| files())
            .and_then(|()| realtime::realtime())
            .and_then(|()| console::console())
            .and_then(|()| schema::schema())
            .and_then(|()| logic::logic())
            .and_then(|()| client()),
        Some(other) => Err(format!(
            "unknown benchmark `{other}` (known: auth, client, compare, console, data, echo, files, logic, peer, pooler, realtime, related, replicas, rows, scale, schema, views, webhooks, workflows; rows (the own-table part of data), compare (two builds, TESSERA_BENCH_BEFORE against TESSERA_BENCH_SERVER), echo (the one-connection webhook against pgbench), pooler, replicas, scale and webhooks are not in the default run)"
        )),
    }
}

/// `@tessera/client`: its bundle against supabase-js and the PocketBase
/// SDK (npm, built the same way), and what it adds to the list route's
/// time from Node against plain `fetch`, on the release server.
fn client() -> Result {
    let server = pg::ensure()?;
    let binary = server_binary()?;
    let dir = format!("{}/../clients/js", env!("CARGO_MANIFEST_DIR"));
    for args in [
        &["ci", "--no-audit", "--no-fund", "--loglevel=error"][..],
        &["run", "--silent", "build"],
    ] {
        run(Command::new("npm").args(args).current_dir(&dir))?;
    }
    for script in ["bench/size.mjs", "bench/hot-path.mjs", "bench/overhead.mjs"] {
        run(Command::new("node")
            .arg(script)
            .current_dir(&dir)
            .env("TESSERA_BIN", &binary)
            .env("TESSERA_TEST_PG_URL", &server))?;
    }
    Ok(())
}

/// Kills the server when the benchmark ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// A minimal HTTP/1.1 exchange; answers status and body.
fn request(
    port: u16,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let body = body.unwrap_or("");
    let auth = bearer
        .map(|b| format!("Authorization: Bearer {b}\r\n"))
        .unwrap_or_default();
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The string value of `"key":"..."` in a JSON text.
fn json_string(body: &str, key: &str) -> Option<String> {
    let start = body.find(&format!("\"{key}\":\""))? + key.len() + 3;
    Some(json_string_at(&body[start..])?.0)
}

fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// What one wrk run measured: requests per second, p50 and p99 latency, non-2xx count.
type Measured = (String, String, String, String);

/// One wrk run of GET `path`, or of the request `script` (a wrk Lua file) sets up.
fn wrk(
    port: u16,
    path: &str,
    bearer: &str,
    duration: &str,
    script: Option<&Path>,
) -> Result<Measured> {
    wrk_with(port, path, bearer, duration, script, THREADS, CONNECTIONS)
}

/// [`wrk`] with `threads` and `connections` of its own; no bearer when empty.
fn wrk_with(
    port: u16,
    path: &str,
    bearer: &str,
    duration: &str,
    script: Option<&Path>,
    threads: &str,
    connections: &str,
) -> Result<Measured> {
    let mut command = Command::new("wrk");
    command.args([
        "-t",
        threads,
        "-c",
        connections,
        "-d",
        duration,
        "--latency",
    ]);
    if !bearer.is_empty() {
        command.args(["-H", &format!("Authorization: Bearer {bearer}")]);
    }
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    let out = command
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("-")
            .to_owned()
    };
    let non_2xx = text
        .lines()
        .find(|l| l.contains("Non-2xx"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or("0")
        .to_owned();
    Ok((field("Requests/sec:"), field("50%"), field("99%"), non_2xx))
}

/// Starts the release server on `database`, with the bench administrator:
/// the binary named by `TESSERA_BENCH_SERVER` when set (to compare builds
/// of two commits in one session), else the workspace's, built first.
fn start_server(database: &str) -> Result<(Server, u16)> {
    start_server_with(database, &[])
}

/// [`start_server`] with more environment variables.
fn start_server_with(database: &str, env: &[(&str, &Path)]) -> Result<(Server, u16)> {
    start_binary(&server_binary()?, database, env)
}

/// The binary `TESSERA_BENCH_SERVER` names, else the workspace's release
/// build, built first.
fn server_binary() -> Result<String> {
    match std::env::var("TESSERA_BENCH_SERVER") {
        Ok(prebuilt) if !prebuilt.is_empty() => Ok(prebuilt),
        _ => {
            run(cargo().args(["build", "--release", "-p", "tessera"]))?;
            Ok(format!("{}/release/tessera", crate::target_dir()))
        }
    }
}

/// Starts `binary` on `database` with the bench administrator and `env`,
/// and waits until it is ready.
fn start_binary(binary: &str, database: &str, env: &[(&str, &Path)]) -> Result<(Server, u16)> {
    start_binary_to(binary, database, env, std::process::Stdio::inherit())
}

/// The statement the server sends to PostgreSQL for GET `path` (a Data
/// API read), with its values written in: a second server on `database`
/// logs it (`data_api_sql` at trace level) while answering the request
/// once.
fn route_statement(database: &str, path: &str, bearer: &str) -> Result<String> {
    let dir = std::env::temp_dir().join(format!("tessera-bench-sql-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let log = dir.join("server.log");
    let logged = (|| {
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let env = [
            ("TESSERA_LOG", Path::new("warn,data_api_sql=trace")),
            ("TESSERA_LOG_FORMAT", Path::new("json")),
        ];
        let (server, port) = start_binary_to(&server_binary()?, database, &env, file.into())?;
        let (status, body) = request(port, "GET", path, Some(bearer), None)?;
        drop(server);
        if status != 200 {
            return Err(format!("{path}: {status} {body}"));
        }
        std::fs::read_to_string(&log).map_err(|e| e.to_string())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    logged?
        .lines()
        .filter(|line| line.contains("\"target\":\"data_api_sql\""))
        .find_map(|line| json_string(line, "message"))
        .ok_or(format!("the server logged no statement for {path}"))
}

/// [`start_binary`] with the server's standard output sent to `stdout`.
fn start_binary_to(
    binary: &str,
    database: &str,
    env: &[(&str, &Path)],
    stdout: std::process::Stdio,
) -> Result<(Server, u16)> {
    ensure_tool("wrk", &["wrk"])?;
    let port = free_port()?;
    let child = Command::new(binary)
        .arg("serve")
        .env("TESSERA_DATABASE_URL", database)
        .env("TESSERA_BIND", format!("127.0.0.1:{port}"))
        .env("TESSERA_BOOTSTRAP_ADMIN_EMAIL", ADMIN_EMAIL)
        .env("TESSERA_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("TESSERA_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(stdout)
        .spawn()
        .map_err(|e| format!("starting tessera: {e}"))?;
    let server = Server(child);
    for _ in 0..100 {
        if request(port, "GET", "/readyz", None, None).is_ok_and(|(s, _)| s == 200) {
            return Ok((server, port));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the server did not become ready".into())
}

fn login(port: u16, email: &str, password: &str) -> Result<String> {
    let login = format!("{{\"email\":\"{email}\",\"password\":\"{password}\"}}");
    let (_, body) = request(port, "POST", "/api/auth/login", None, Some(&login))?;
    json_string(&body, "token").ok_or(format!("login failed: {body}"))
}

fn token(port: u16, session: &str, plane: &str) -> Result<String> {
    let req = format!("{{\"name\":\"bench\",\"lifetimeDays\":1,\"plane\":\"{plane}\"}}");
    let (_, body) = request(port, "POST", "/api/auth/tokens", Some(session), Some(&req))?;
    json_string(&body, "token").ok_or(format!("token creation failed: {body}"))
}

/// Creates `email` as a member of `role`, signs in and creates an API
/// token; answers the user's id and the token.
fn member_token(port: u16, admin: &str, email: &str, role: &str) -> Result<(String, String)> {
    let user = post(
        port,
        "/admin/api/users",
        admin,
        &format!(
            r#"{{"email":"{email}","password":"{ADMIN_PASSWORD}","emailVerified":true,"roleIds":["{role}"]}}"#
        ),
    )?;
    let user = json_string(&user, "id").ok_or(format!("no user id: {user}"))?;
    let session = login(port, email, ADMIN_PASSWORD)?;
    Ok((user, token(port, &session, "API")?))
}

/// Creates role `name` with API access holding each of `actions` on
/// `resource`, with the row `filter` (JSON) if any; answers its id.
fn role_granted(
    port: u16,
    admin: &str,
    name: &str,
    resource: &str,
    actions: &[&str],
    filter: Option<&str>,
) -> Result<String> {
    let role = post(
        port,
        "/admin/api/roles",
        admin,
        &format!(r#"{{"name":"{name}","apiAccess":true}}"#),
    )?;
    let role = json_string(&role, "id").ok_or(format!("no role id: {role}"))?;
    let filter = filter
        .map(|f| format!(r#","filter":{f}"#))
        .unwrap_or_default();
    for action in actions {
        post(
            port,
            "/admin/api/grants",
            admin,
            &format!(
                r#"{{"roleId":"{role}","resourceId":"{resource}","action":"{action}"{filter}}}"#
            ),
        )?;
    }
    Ok(role)
}

/// Changes settings (`data`: a JSON object of key and value).
fn settings(port: u16, admin: &str, data: &str) -> Result {
    patch(port, "/admin/api/settings", admin, data).map(drop)
}

/// The id of the user signed in with `session`.
fn user_id(port: u16, session: &str) -> Result<String> {
    let (_, me) = request(port, "GET", "/api/auth/me", Some(session), None)?;
    json_string(&me, "id").ok_or(format!("no user id: {me}"))
}

fn print_header(duration: &str) {
    println!(
        "\nwrk -t{THREADS} -c{CONNECTIONS} -d{duration}, release build, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<80} {:>10} {:>10} {:>10} {:>8}",
        "scenario", "req/s", "p50", "p99", "non-2xx"
    );
}

fn print_row(name: &str, (rps, p50, p99, non_2xx): &Measured) {
    println!("{name:<80} {rps:>10} {p50:>10} {p99:>10} {non_2xx:>8}");
}

fn auth() -> Result {
    let server_url = pg::ensure()?;
    let (server, port) = start_server(&format!("{server_url}/tessera_bench"))?;
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "\nRSS MB idle after start: {:.1} (target <= 30)",
        memory_mb(server.0.id(), "VmRSS:")
    );
    let session = login(port, ADMIN_EMAIL, ADMIN_PASSWORD)?;
    let api_token = token(port, &session, "API")?;
    let admin_token = token(port, &session, "ADMIN")?;

    let scenarios = [
        (
            "GET /api/auth/me, session (200)",
            "/api/auth/me",
            session.as_str(),
        ),
        (
            "GET /api/auth/me, API token (403: session-only route, after full resolution)",
            "/api/auth/me",
            api_token.as_str(),
        ),
        (
            "GET /admin/api/roles, ADMIN token (200)",
            "/admin/api/roles",
            admin_token.as_str(),
        ),
    ];
    print_header(DURATION);
    for (name, path, bearer) in scenarios {
        print_row(name, &wrk(port, path, bearer, DURATION, None)?);
    }
    sign_in_timing(port, &session)?;
    storm(&server, port, &session)
}

/// Sign-in tries for each side of the timing comparison.
const TIMING_TRIES: usize = 200;

/// Wrong-password sign-ins for a known and an unknown email, interleaved
/// (the order alternating): their median times must be within 10%.
fn sign_in_timing(port: u16, admin: &str) -> Result {
    settings(port, admin, r#"{"auth.login_rate_limit_per_minute":0}"#)?;
    post(
        port,
        "/admin/api/users",
        admin,
        &format!(r#"{{"email":"timing@example.com","password":"{ADMIN_PASSWORD}"}}"#),
    )?;
    let mut times = [Vec::new(), Vec::new()];
    for i in 0..TIMING_TRIES * 2 {
        let side = (i + i / 2) % 2;
        let email = ["timing@example.com", "nobody@example.com"][side];
        let body = format!(r#"{{"email":"{email}","password":"wrong-password-1"}}"#);
        let started = std::time::Instant::now();
        let (status, _) = request(port, "POST", "/api/auth/login", None, Some(&body))?;
        times[side].push(started.elapsed());
        if status != 401 {
            return Err(format!("a wrong sign-in answered {status}"));
        }
    }
    let [known, unknown] = times.map(|mut t| {
        t.sort_unstable();
        t[t.len() / 2]
    });
    let (fast, slow) = (known.min(unknown), known.max(unknown));
    println!(
        "\nsign-in with a wrong password, median of {TIMING_TRIES} each: known email {known:?}, unknown email {unknown:?} (target: within 10%)"
    );
    if slow - fast > slow / 10 {
        return Err("sign-in time tells known emails from unknown ones".into());
    }
    Ok(())
}

/// `VmRSS` or `VmHWM` (the peak) of process `pid`, in MB.
fn memory_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The sign-in storm: 16 connections signing in for 20 s (right and wrong
/// passwords alternating, the rate limit off), while 4 connections call
/// `GET /api/auth/me`; the server's resident memory before, at the peak and after.
fn storm(server: &Server, port: u16, session: &str) -> Result {
    settings(
        port,
        session,
        r#"{"auth.login_rate_limit_per_minute":0,"auth.lockout_threshold":1000}"#,
    )?;
    let pid = server.0.id();
    let dir = std::env::temp_dir().join(format!("tessera-storm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("login.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
             local n = 0\nrequest = function()\n  n = n + 1\n  local pw = (n % 2 == 0) and \"{ADMIN_PASSWORD}\" or \"wrong-password\"\n  \
             return wrk.format(nil, nil, nil, '{{\"email\":\"{ADMIN_EMAIL}\",\"password\":\"' .. pw .. '\"}}')\nend\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_secs(3));
    let before = memory_mb(pid, "VmRSS:");
    let login_storm = || {
        wrk_with(
            port,
            "/api/auth/login",
            "",
            STORM_DURATION,
            Some(&script),
            THREADS,
            CONNECTIONS,
        )
    };
    let storm = login_storm()?;
    let me_session = session.to_owned();
    let me = std::thread::spawn(move || {
        wrk_with(
            port,
            "/api/auth/me",
            &me_session,
            STORM_DURATION,
            None,
            "1",
            "1",
        )
    });
    let beside = login_storm()?;
    let me = me.join().map_err(|_| "the /me load failed".to_owned())??;
    let peak = memory_mb(pid, "VmHWM:");
    std::thread::sleep(Duration::from_secs(5));
    let after = memory_mb(pid, "VmRSS:");
    println!(
        "\nsign-in storm: wrk -t{THREADS} -c{CONNECTIONS} -d{STORM_DURATION} POST /api/auth/login (right and wrong passwords: half answer 401)"
    );
    print_row("POST /api/auth/login, storm alone", &storm);
    print_row(
        "POST /api/auth/login, storm again, with one client calling /me",
        &beside,
    );
    print_row(
        "GET /api/auth/me, session, one connection, during the storm",
        &me,
    );
    println!(
        "RSS MB: before {before:.1}, peak {peak:.1}, 5 s after {after:.1} (targets: idle <= 30, peak <= 100, after < 60)"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Runs SQL through psql against `url`.
fn psql(url: &str, sql: &str) -> Result {
    run(Command::new("psql").args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql]))
}

/// The answer of `sql` on `database`, unaligned, trimmed.
fn psql_value(database: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", database, "-c", sql])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A POST of the Admin or Data API with `{ data }`; answers the body, or fails unless 2xx.
fn post(port: u16, path: &str, bearer: &str, data: &str) -> Result<String> {
    send(port, "POST", path, bearer, data)
}

/// A PATCH with `{ data }`, as [`post`].
fn patch(port: u16, path: &str, bearer: &str, data: &str) -> Result<String> {
    send(port, "PATCH", path, bearer, data)
}

/// A request with `{ data }`; answers the body, or fails unless 2xx.
fn send(port: u16, method: &str, path: &str, bearer: &str, data: &str) -> Result<String> {
    let (status, body) = request(
        port,
        method,
        path,
        Some(bearer),
        Some(&format!("{{\"data\":{data}}}")),
    )?;
    if (200..300).contains(&status) {
        Ok(body)
    } else {
        Err(format!("{method} {path}: {status} {body}"))
    }
}

/// Exposes resource `id` for `methods` (a JSON array).
fn expose(port: u16, admin: &str, id: &str, methods: &str) -> Result {
    let path = format!("/admin/api/resources/{id}");
    patch(
        port,
        &path,
        admin,
        &format!(r#"{{"exposedMethods":{methods}}}"#),
    )
    .map(drop)
}

/// Runs `script` with pgbench for `seconds`; answers its TPS.
fn pgbench(database: &str, script: &Path, seconds: &str) -> Result<f64> {
    pgbench_with(database, script, seconds, CONNECTIONS)
}

/// [`pgbench`] over `connections` clients.
fn pgbench_with(database: &str, script: &Path, seconds: &str, connections: &str) -> Result<f64> {
    pgbench_in(database, script, (seconds, connections), "prepared")
}

/// [`pgbench_with`] sending its statements in query `mode` (`prepared`,
/// or `extended` for unnamed ones).
fn pgbench_in(
    database: &str,
    script: &Path,
    (seconds, connections): (&str, &str),
    mode: &str,
) -> Result<f64> {
    let out = Command::new("pgbench")
        .args([
            "-n",
            "-M",
            mode,
            "-c",
            connections,
            "-j",
            THREADS,
            "-T",
            seconds,
            "-f",
        ])
        .arg(script)
        .arg(database)
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with("tps"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or(format!(
            "pgbench failed: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        ))
}

/// A release server on a new database `name`: the server, its port, the
/// database URL and an administrator's session.
fn fresh_server(name: &str) -> Result<(Server, u16, String, String)> {
    fresh_server_with(name, &[])
}

/// [`fresh_server`] with more environment variables.
fn fresh_server_with(name: &str, env: &[(&str, &Path)]) -> Result<(Server, u16, String, String)> {
    fresh_binary(&server_binary()?, name, env)
}

/// [`fresh_server_with`] running `binary`.
fn fresh_binary(
    binary: &str,
    name: &str,
    env: &[(&str, &Path)],
) -> Result<(Server, u16, String, String)> {
    let server_url = pg::ensure()?;
    ensure_tool("pgbench", &["postgresql-contrib"])?;
    psql(
        &format!("{server_url}/postgres"),
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )?;
    let database = format!("{server_url}/{name}");
    let (server, port) = start_binary(binary, &database, env)?;
    let admin = login(port, ADMIN_EMAIL, ADMIN_PASSWORD)?;
    Ok((server, port, database, admin))
}

/// A release server on a new database `name` for webhook benchmarks, the
/// public rate limit raised out of the way: the server, its port, the
/// database, the administrator's session and user id.
fn webhook_server(name: &str) -> Result<(Server, u16, String, String, String)> {
    let (server, port, database, admin) = fresh_server(name)?;
    let me = user_id(port, &admin)?;
    settings(
        port,
        &admin,
        r#"{"workflows.public_rate_limit_per_minute":1000000}"#,
    )?;
    Ok((server, port, database, admin, me))
}

/// Workflow webhooks: a public sync echo (transform + finish), the same
/// authenticated with a token, and an async one; the public rate limit
/// raised; then the public echo over one connection (its latency alone).
fn workflows() -> Result {
    let (_server, port, _database, admin, me) = webhook_server("tessera_bench_workflows")?;
    let steps = r#"[{"id":"greet","type":"transform","output":{"hello":"{{start.data.body.name}}"}},
        {"id":"done","type":"finish","result":"{{steps.greet.result}}"}]"#;
    for (slug, trigger) in [
        (
            "echo",
            format!(r#"{{"type":"webhook","access":"public","executeAs":"{me}"}}"#),
        ),
        (
            "echo-auth",
            r#"{"type":"webhook","access":"authenticated"}"#.to_owned(),
        ),
        (
            "echo-async",
            format!(
                r#"{{"type":"webhook","access":"public","response":"async","executeAs":"{me}"}}"#
            ),
        ),
    ] {
        publish_workflow(port, &admin, slug, &trigger, steps)?;
    }
    let api_token = token(port, &admin, "API")?;
    let dir = std::env::temp_dir().join(format!("tessera-bench-wf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let call = dir.join("call.lua");
    std::fs::write(
        &call,
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = '{\"name\":\"bench\"}'\n",
    )
    .map_err(|e| e.to_string())?;
    print_header(WORKFLOW_DURATION);
    for (name, slug, bearer) in [
        ("public sync echo (transform + finish)", "echo", ""),
        (
            "authenticated sync echo (API token)",
            "echo-auth",
            api_token.as_str(),
        ),
        ("public async echo (202)", "echo-async", ""),
    ] {
        let path = format!("/api/workflows/{slug}/webhook");
        wrk(port, &path, bearer, "3s", Some(&call))?;
        print_row(
            name,
            &wrk(port, &path, bearer, WORKFLOW_DURATION, Some(&call))?,
        );
    }
    print_row(
        "public sync echo, 1 connection",
        &wrk_with(
            port,
            "/api/workflows/echo/webhook",
            "",
            WORKFLOW_DURATION,
            Some(&call),
            "1",
            "1",
        )?,
    );
    Ok(())
}

/// Creates and publishes a workflow; answers its id.
fn publish_workflow(
    port: u16,
    admin: &str,
    slug: &str,
    trigger: &str,
    steps: &str,
) -> Result<String> {
    let created = post(
        port,
        "/admin/api/workflows",
        admin,
        &format!(r#"{{"slug":"{slug}","trigger":{trigger},"steps":{steps}}}"#),
    )?;
    let id = json_string(&created, "id").ok_or(format!("no workflow id: {created}"))?;
    post(
        port,
        &format!("/admin/api/workflows/{id}/publish"),
        admin,
        "null",
    )?;
    Ok(id)
}

/// Rows of the DataView benchmark: one month of sales.
const VIEW_ROWS: u32 = 1_000_000;
/// Clients of the DataView benchmark: each request scans the month, so a
/// few keep every core busy (more only queue past wrk's 2 s timeout).
const VIEW_CONNECTIONS: &str = "4";

/// A per-day sum over [`VIEW_ROWS`] rows of one month through
/// `GET /api/views/{slug}`, against pgbench running the statement the
/// view's preview shows, with its values written in.
fn views() -> Result {
    let (_server, port, database, admin) = fresh_server("tessera_bench_views")?;
    post(
        port,
        "/admin/api/schema/app/tables",
        &admin,
        r#"{"name":"bench_sales","columns":[
        {"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},
        {"name":"at","dataType":"timestamptz","nullable":false},
        {"name":"amount","dataType":"numeric(10,2)","nullable":false}]}"#,
    )?;
    // Evenly over 30 days of March 2026 (2,592,000 s / 1,000,000 rows).
    psql(
        &database,
        &format!(
            "INSERT INTO app.bench_sales (at, amount) \
             SELECT timestamptz '2026-03-01 00:00:00+00' + i * interval '2.592 seconds', (i % 10000) / 100.0 \
             FROM generate_series(0, {VIEW_ROWS} - 1) AS i; ANALYZE app.bench_sales"
        ),
    )?;
    let view = post(
        port,
        "/admin/api/dataviews",
        &admin,
        r#"{"slug":"bench-per-day","name":"Sales per day","source":"app.bench_sales",
        "columns":[{"name":"day","bucket":"day","column":"at"},{"name":"total","agg":"sum","column":"amount"},
                   {"name":"count","agg":"count"}],"sort":["day"],"limit":1000}"#,
    )?;
    let id = json_string(&view, "id").ok_or(format!("no view id: {view}"))?;
    post(
        port,
        &format!("/admin/api/dataviews/{id}/publish"),
        &admin,
        "null",
    )?;
    let preview = post(
        port,
        &format!("/admin/api/dataviews/{id}/preview"),
        &admin,
        "null",
    )?;
    let sql = statement_of(&preview).ok_or(format!("no statement in {preview}"))?;
    let api_token = token(port, &admin, "API")?;
    let dir = std::env::temp_dir().join(format!("tessera-bench-views-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("per_day.sql");
    std::fs::write(&script, format!("{sql};\n")).map_err(|e| e.to_string())?;
    let path = "/api/views/bench-per-day";
    let (status, body) = request(port, "GET", path, Some(&api_token), None)?;
    if status != 200 || body.matches("\"day\"").count() != 30 {
        return Err(format!("the view answered {status}: {body}"));
    }
    println!(
        "\nwrk -t{THREADS} -c{VIEW_CONNECTIONS} -d{DATA_DURATION}, release build, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let load = |seconds: &str| {
        wrk_with(
            port,
            path,
            &api_token,
            seconds,
            None,
            THREADS,
            VIEW_CONNECTIONS,
        )
    };
    load("3s")?;
    let served = load(DATA_DURATION)?;
    print_row(
        "GET /api/views/bench-per-day (30 days over 1,000,000 rows)",
        &served,
    );
    let tps = pgbench_with(&database, &script, "20", VIEW_CONNECTIONS)?;
    println!(
        "pgbench -c{VIEW_CONNECTIONS} -j{THREADS} -M prepared, the same statement: {tps:.2} tps; \
         the view answers {:.0}% of it (target >= 80%)",
        rps(&served) / tps * 100.0
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The statement of a preview's answer with its bound values written in as
/// literals (the preview's JSON holds only strings and numbers there).
fn statement_of(preview: &str) -> Option<String> {
    let mut sql = json_string(preview, "sql")?;
    let mut rest = &preview[preview.find("\"params\":[")? + 10..];
    let mut params = Vec::new();
    while !rest.starts_with(']') {
        if rest.starts_with('"') {
            let (text, len) = json_string_at(rest)?;
            params.push(format!("'{}'", text.replace('\'', "''")));
            rest = &rest[len..];
        } else {
            let end = rest.find([',', ']'])?;
            params.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    for (i, literal) in params.iter().enumerate().rev() {
        sql = sql.replace(&format!("${}", i + 1), literal);
    }
    Some(sql)
}

/// The JSON string `text` starts with, unescaped (`\"` and `\\` only), and
/// its length with its quotes.
fn json_string_at(text: &str) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match (escaped, c) {
            (true, c) => {
                out.push(c);
                escaped = false;
            }
            (false, '\\') => escaped = true,
            (false, '"') => return Some((out, i + 1)),
            (false, c) => out.push(c),
        }
    }
    None
}

/// Only the peer workload, on a database of its own.
fn peer_only() -> Result {
    let (_server, port, database, admin) = fresh_server("tessera_bench_peer")?;
    peer(&database, port, &admin)
}

/// The own-table fixture of the Data API benchmark: 100,000 rows, every
/// tenth the reader's, behind a `$USER` row filter.
struct RowsFixture {
    /// The reader's id.
    user: String,
    /// The reader's API token (a member of a role with read and create).
    api_token: String,
    /// The key of one of the reader's rows.
    key: String,
}

/// Creates `app.bench_rows` on the server at `port` (its `database`) with
/// the reader of [`RowsFixture`].
fn seed_rows(port: u16, database: &str, admin: &str) -> Result<RowsFixture> {
    let table = post(
        port,
        "/admin/api/schema/app/tables",
        admin,
        r#"{"name":"bench_rows","columns":[
        {"name":"id","dataType":"bigint","primaryKey":true,"identity":"ALWAYS"},
        {"name":"owner_id","dataType":"uuid","nullable":false},
        {"name":"title","dataType":"text","nullable":false},
        {"name":"created_at","dataType":"timestamptz","nullable":false,"default":"now()"}]}"#,
    )?;
    let resource = json_string(&table, "resourceId").ok_or(format!("no resource: {table}"))?;
    expose(port, admin, &resource, r#"["GET","POST"]"#)?;
    let own = r#"{"owner_id":{"eq":"$USER.id"}}"#;
    let role = role_granted(
        port,
        admin,
        "Bench",
        &resource,
        &["read", "create"],
        Some(own),
    )?;
    let (user, api_token) = member_token(port, admin, "reader@example.com", &role)?;

    // Every tenth row is the bench user's; the rest belong to others.
    psql(
        database,
        &format!(
            "INSERT INTO app.bench_rows (owner_id, title, created_at) \
         SELECT CASE WHEN i % 10 = 0 THEN '{user}'::uuid ELSE gen_random_uuid() END, 'row ' || i, now() - i * interval '1 second' \
         FROM generate_series(1, {DATA_ROWS}) AS i; \
         CREATE INDEX bench_rows_owner_idx ON app.bench_rows (owner_id, id); ANALYZE app.bench_rows;"
        ),
    )?;
    let (_, one) = request(
        port,
        "GET",
        "/api/data/app/bench_rows?limit=1",
        Some(&api_token),
        None,
    )?;
    let key = one
        .split("\"id\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .ok_or(format!("no row: {one}"))?
        .trim()
        .to_owned();
    Ok(RowsFixture {
        user,
        api_token,
        key,
    })
}

/// The wrk script of the benchmark's POST: one row of `user`'s.
fn insert_script(path: &Path, user: &str) -> Result {
    std::fs::write(path, format!(
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = '{{\"data\":{{\"owner_id\":\"{user}\",\"title\":\"bench\"}}}}'\n"))
        .map_err(|e| e.to_string())
}

/// The Data API under a `$USER` row filter, against pgbench running the same SELECT.
fn data() -> Result {
    let (_server, port, database, admin) = fresh_server("tessera_bench_data")?;
    let RowsFixture {
        user,
        api_token,
        key,
    } = seed_rows(port, &database, &admin)?;

    let dir = std::env::temp_dir().join(format!("tessera-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let insert = dir.join("insert.lua");
    insert_script(&insert, &user)?;
    // The statement the list route sends for this request, values inlined.
    let select = format!(
        "SELECT json_build_object('data', coalesce(json_agg(\"x\"), '[]'::json), 'meta', json_build_object('limit', 100, 'offset', 0))::text AS body \
         FROM (SELECT \"r\".\"id\", \"r\".\"owner_id\", \"r\".\"title\", \"r\".\"created_at\" FROM \"app\".\"bench_rows\" AS \"r\" \
         WHERE \"r\".\"owner_id\" = CAST('{user}' AS uuid) ORDER BY \"r\".\"id\" ASC LIMIT 100 OFFSET 0) AS \"x\";\n"
    );
    let script = dir.join("list.sql");
    std::fs::write(&script, &select).map_err(|e| e.to_string())?;

    // Each side gets a short warm-up (connections, prepared statements, caches).
    wrk(
        port,
        "/api/data/app/bench_rows?limit=100",
        &api_token,
        "3s",
        None,
    )?;
    let list = wrk(
        port,
        "/api/data/app/bench_rows?limit=100",
        &api_token,
        DATA_DURATION,
        None,
    )?;
    let tps = pgbench(&database, &script, "3")
        .and_then(|_| pgbench(&database, &script, DATA_DURATION.trim_end_matches('s')))?;
    let by_key = wrk(
        port,
        &format!("/api/data/app/bench_rows/{key}"),
        &api_token,
        DATA_DURATION,
        None,
    )?;
    let insert = wrk(
        port,
        "/api/data/app/bench_rows",
        &api_token,
        DATA_DURATION,
        Some(&insert),
    )?;
    print_header(DATA_DURATION);
    print_row(
        "GET 100 rows, $USER row filter, API token (non-admin)",
        &list,
    );
    print_row("GET one row by key, API token", &by_key);
    print_row(
        "POST one row, create grant filter checked, API token",
        &insert,
    );
    let rps: f64 = list.0.parse().unwrap_or(0.0);
    println!(
        "\npgbench -M prepared -c{CONNECTIONS} -j{THREADS} -T{DATA_DURATION}, the list route's SELECT: {tps:.0} TPS"
    );
    println!(
        "list route / pgbench: {:.0}% (target: 50% or more)",
        rps / tps * 100.0
    );
    let _ = std::fs::remove_dir_all(&dir);
    peer(&database, port, &admin)
}

/// The peer workload's table and rows (`../shared/bench/peer_items.sql`).
const PEER_ITEMS: &str = include_str!("../bench/peer_items.sql");
/// The plain SELECT of the same rows, as pgbench runs it.
const PEER_SELECT: &str = include_str!("../bench/pgbench_items_owner7.sql");
/// The peer workload's request.
const PEER_PATH: &str = "/api/data/public/bench_items?filter=%7B%22owner_id%22%3A%7B%22eq%22%3A7%7D%7D&sort=id&limit=100";

/// Builds and starts the floor server of `../shared/bench/floor-server` (or
/// `TESSERA_FLOOR_DIR`) on `database`, when it is there.
fn start_floor(database: &str) -> Result<Option<(Server, u16)>> {
    // `cargo run` sets the manifest directory at run time; the compiled-in one
    // may be another checkout sharing the build cache.
    let xtask_dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let dir = std::env::var("TESSERA_FLOOR_DIR")
        .unwrap_or_else(|_| format!("{xtask_dir}/../../shared/bench/floor-server"));
    let manifest = Path::new(&dir).join("Cargo.toml");
    if !manifest.exists() {
        println!("no floor server at {dir}: the floor is not measured");
        return Ok(None);
    }
    let target = std::env::temp_dir().join("tessera-floor-target");
    run(cargo()
        .args(["build", "-q", "--release", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target))?;
    let port = free_port()?;
    let child = Command::new(target.join("release/floor-server"))
        .args([database, &format!("127.0.0.1:{port}"), "8"])
        .spawn()
        .map_err(|e| format!("starting the floor server: {e}"))?;
    let floor = Server(child);
    for _ in 0..50 {
        if request(port, "GET", "/rust?owner=7", None, None).is_ok_and(|(s, _)| s == 200) {
            return Ok(Some((floor, port)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the floor server did not answer".into())
}

/// The median of `values` (the mean of the middle two when even).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// Requests per second of a measurement.
fn rps(measured: &Measured) -> f64 {
    measured.0.parse().unwrap_or(0.0)
}

/// A wrk latency (`812.00us`, `1.23ms`, `2.01s`) in milliseconds.
fn millis(latency: &str) -> f64 {
    let (number, factor) = if let Some(n) = latency.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = latency.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = latency.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (latency, 1.0)
    };
    number.parse::<f64>().map_or(f64::NAN, |n| n * factor)
}

/// The peer workload of `../shared/bench/`: 100 rows of owner 7 by a
/// non-administrator whose read grant filters on that owner, in variants A
/// (owner index) and B (+ (owner_id, id)), against pgbench's plain SELECT and
/// the floor server, alternating in one run.
/// Loads the peer workload's table on `database` (served at `port`) and
/// answers an API token of its reader, whose list is checked once.
fn peer_token(database: &str, port: u16, admin: &str) -> Result<String> {
    run(Command::new("psql").args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        database,
        "-c",
        PEER_ITEMS,
    ]))?;
    let resource = post(
        port,
        "/admin/api/resources",
        admin,
        r#"{"schema":"public","table":"bench_items"}"#,
    )?;
    let resource = json_string(&resource, "id").ok_or(format!("no resource: {resource}"))?;
    expose(port, admin, &resource, r#"["GET"]"#)?;
    let role = post(
        port,
        "/admin/api/roles",
        admin,
        r#"{"name":"Peer","apiAccess":true}"#,
    )?;
    let role = json_string(&role, "id").ok_or("no role id")?;
    post(
        port,
        "/admin/api/grants",
        admin,
        &format!(
            r#"{{"roleId":"{role}","resourceId":"{resource}","action":"read","filter":{{"owner_id":{{"eq":7}}}}}}"#
        ),
    )?;
    post(
        port,
        "/admin/api/users",
        admin,
        &format!(
            r#"{{"email":"peer@example.com","password":"{ADMIN_PASSWORD}","emailVerified":true,"roleIds":["{role}"]}}"#
        ),
    )?;
    let session = login(port, "peer@example.com", ADMIN_PASSWORD)?;
    let token = token(port, &session, "API")?;
    let (status, body) = request(port, "GET", PEER_PATH, Some(&token), None)?;
    if status != 200 || body.matches("\"owner_id\":7").count() != 100 {
        return Err(format!("the peer request: {status} {body}"));
    }
    Ok(token)
}

fn peer(database: &str, port: u16, admin: &str) -> Result {
    let token = peer_token(database, port, admin)?;
    let dir = std::env::temp_dir().join(format!("tessera-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("owner7.sql");
    std::fs::write(&script, PEER_SELECT).map_err(|e| e.to_string())?;
    let floor = start_floor(database)?;
    let seconds = DATA_DURATION.trim_end_matches('s');
    println!(
        "\npeer workload (../shared/bench): {PEER_PATH}, API token, read grant filtered on owner_id = 7"
    );
    println!(
        "wrk -t{THREADS} -c{CONNECTIONS} -d{DATA_DURATION}; pgbench -M prepared -c{CONNECTIONS} -j{THREADS}; two alternating rounds each"
    );
    for variant in ["A", "B"] {
        if variant == "B" {
            psql(
                database,
                "CREATE INDEX IF NOT EXISTS bench_items_owner_id_id_idx ON bench_items (owner_id, id); ANALYZE bench_items",
            )?;
        }
        wrk(port, PEER_PATH, &token, "3s", None)?;
        if let Some((_, floor_port)) = &floor {
            wrk_with(
                *floor_port,
                "/rust?owner=7",
                "",
                "3s",
                None,
                THREADS,
                CONNECTIONS,
            )?;
        }
        let (mut tessera, mut plain, mut minimal) = (0.0, 0.0, 0.0);
        for _ in 0..2 {
            tessera += rps(&wrk(port, PEER_PATH, &token, DATA_DURATION, None)?);
            if let Some((_, floor_port)) = &floor {
                minimal += rps(&wrk_with(
                    *floor_port,
                    "/rust?owner=7",
                    "",
                    DATA_DURATION,
                    None,
                    THREADS,
                    CONNECTIONS,
                )?);
            }
            plain += pgbench(database, &script, seconds)?;
        }
        let (tessera, plain, minimal) = (tessera / 2.0, plain / 2.0, minimal / 2.0);
        print!(
            "variant {variant}: Tessera {tessera:.0} req/s, pgbench {plain:.0} tps: {:.0}% of the plain SELECT",
            tessera / plain * 100.0
        );
        if minimal > 0.0 {
            print!(
                "; floor (rows to JSON in Rust) {minimal:.0} req/s: Tessera at {:.0}% of the floor",
                tessera / minimal * 100.0
            );
        }
        println!();
    }
    println!("targets: variant A >= 50% of the plain SELECT; variant B >= 90% of the floor");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Bytes of the file the files benchmark moves.
const FILE_BYTES: usize = 10 * 1024 * 1024;
/// Concurrent uploads while the server's memory is watched.
const CONCURRENT_UPLOADS: usize = 16;

/// Files: upload and download of a 10 MiB file (best of 5, MB/s) next to
/// `cp` of the same file on the same disk, and the server's resident memory
/// during 16 concurrent uploads.
fn files() -> Result {
    ensure_tool("curl", &["curl"])?;
    let dir = std::env::temp_dir().join(format!("tessera-bench-files-{}", std::process::id()));
    let store = dir.join("store");
    std::fs::create_dir_all(&store).map_err(|e| e.to_string())?;
    let sample = dir.join("sample.bin");
    let bytes: Vec<u8> = (0..FILE_BYTES as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&sample, &bytes).map_err(|e| e.to_string())?;
    let mb = FILE_BYTES as f64 / 1e6;
    let cp = best_of(5, || {
        let started = std::time::Instant::now();
        std::fs::copy(&sample, dir.join("copy.bin")).map_err(|e| e.to_string())?;
        Ok(started.elapsed().as_secs_f64())
    })?;
    let (server, port, _database, admin) =
        fresh_server_with("tessera_bench_files", &[("TESSERA_FILES_DIR", &store)])?;
    let url = format!("http://127.0.0.1:{port}/api/files");
    let mut id = String::new();
    let upload = best_of(5, || {
        let (seconds, body) = curl_upload(&url, &admin, &sample)?;
        id = json_string(&body, "id").ok_or(format!("upload failed: {body}"))?;
        Ok(seconds)
    })?;
    let download = best_of(5, || {
        let output = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{time_total}", "-H"])
            .arg(format!("Authorization: Bearer {admin}"))
            .arg(format!("{url}/{id}"))
            .output()
            .map_err(|e| format!("curl: {e}"))?;
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<f64>()
            .map_err(|e| e.to_string())
    })?;
    println!("\nfiles, {FILE_BYTES} bytes, release build, best of 5");
    println!("{:<40} {:>10}", "operation", "MB/s");
    println!("{:<40} {:>10.0}", "cp on the same disk", mb / cp);
    println!(
        "{:<40} {:>10.0}",
        "POST /api/files (multipart upload)",
        mb / upload
    );
    println!(
        "{:<40} {:>10.0}",
        "GET /api/files/{id} (download)",
        mb / download
    );

    let pid = server.0.id();
    let before = memory_mb(pid, "VmRSS:");
    let uploads: Vec<Child> = (0..CONCURRENT_UPLOADS)
        .map(|_| {
            Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-H"])
                .arg(format!("Authorization: Bearer {admin}"))
                .arg("-F")
                .arg(format!("file=@{}", sample.display()))
                .arg(&url)
                .spawn()
                .map_err(|e| format!("curl: {e}"))
        })
        .collect::<Result<_>>()?;
    let mut peak = before;
    let mut running = uploads;
    while !running.is_empty() {
        peak = peak.max(memory_mb(pid, "VmRSS:"));
        running.retain_mut(|child| child.try_wait().ok().flatten().is_none());
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "RSS MB during {CONCURRENT_UPLOADS} concurrent uploads of {FILE_BYTES} bytes: before {before:.1}, peak {peak:.1}, process peak (VmHWM) {:.1} (target < 100)",
        memory_mb(pid, "VmHWM:")
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The smallest of `n` measurements.
fn best_of(n: usize, mut measure: impl FnMut() -> Result<f64>) -> Result<f64> {
    let mut best = f64::MAX;
    for _ in 0..n {
        best = best.min(measure()?);
    }
    Ok(best)
}

/// Uploads `file` with curl; answers the seconds it took and the body.
fn curl_upload(url: &str, bearer: &str, file: &Path) -> Result<(f64, String)> {
    let output = Command::new("curl")
        .args(["-s", "-w", "\n%{time_total}", "-H"])
        .arg(format!("Authorization: Bearer {bearer}"))
        .arg("-F")
        .arg(format!("file=@{}", file.display()))
        .arg(url)
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let (body, seconds) = text.rsplit_once('\n').ok_or("curl answered nothing")?;
    Ok((
        seconds.trim().parse().map_err(|e| format!("{e}"))?,
        body.to_owned(),
    ))
}
