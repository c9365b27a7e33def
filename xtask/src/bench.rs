//! `cargo xtask bench auth`: the credential resolver under load, measured with wrk
//! against a release build.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

use crate::{Result, cargo, ensure_tool, pg, run};

const CONNECTIONS: &str = "16";
const THREADS: &str = "2";
const DURATION: &str = "10s";
const ADMIN_EMAIL: &str = "bench@example.com";
const ADMIN_PASSWORD: &str = "bench-password-1";

/// Runs the named benchmark suite.
pub fn suite(name: Option<&str>) -> Result {
    match name {
        None | Some("auth") => auth(),
        Some(other) => Err(format!("unknown benchmark `{other}` (known: auth)")),
    }
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
    let start = body.find(&format!("\"{key}\":\""))? + key.len() + 4;
    Some(body[start..].split('"').next()?.to_owned())
}

fn free_port() -> Result<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// One wrk run: requests per second, p50 and p99 latency, non-2xx count.
fn wrk(port: u16, path: &str, bearer: &str) -> Result<(String, String, String, String)> {
    let out = Command::new("wrk")
        .args([
            "-t",
            THREADS,
            "-c",
            CONNECTIONS,
            "-d",
            DURATION,
            "--latency",
        ])
        .args(["-H", &format!("Authorization: Bearer {bearer}")])
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

fn auth() -> Result {
    let server_url = pg::ensure()?;
    ensure_tool("wrk", &["wrk"])?;
    run(cargo().args(["build", "--release", "-p", "tessera"]))?;
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")));
    let port = free_port()?;
    let database = format!("{server_url}/tessera_bench");
    let child = Command::new(format!("{target}/release/tessera"))
        .arg("serve")
        .env("TESSERA_DATABASE_URL", &database)
        .env("TESSERA_BIND", format!("127.0.0.1:{port}"))
        .env("TESSERA_BOOTSTRAP_ADMIN_EMAIL", ADMIN_EMAIL)
        .env("TESSERA_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("TESSERA_LOG", "warn")
        .spawn()
        .map_err(|e| format!("starting tessera: {e}"))?;
    let _server = Server(child);
    let mut ready = false;
    for _ in 0..100 {
        if request(port, "GET", "/readyz", None, None).is_ok_and(|(s, _)| s == 200) {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !ready {
        return Err("the server did not become ready".into());
    }
    let login = format!("{{\"email\":\"{ADMIN_EMAIL}\",\"password\":\"{ADMIN_PASSWORD}\"}}");
    let (_, body) = request(port, "POST", "/api/auth/login", None, Some(&login))?;
    let session = json_string(&body, "token").ok_or(format!("login failed: {body}"))?;
    let token = |plane: &str| -> Result<String> {
        let req = format!("{{\"name\":\"bench\",\"lifetimeDays\":1,\"plane\":\"{plane}\"}}");
        let (_, body) = request(port, "POST", "/api/auth/tokens", Some(&session), Some(&req))?;
        json_string(&body, "token").ok_or(format!("token creation failed: {body}"))
    };
    let api_token = token("API")?;
    let admin_token = token("ADMIN")?;

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
    println!(
        "\nwrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, release build, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<80} {:>10} {:>10} {:>10} {:>8}",
        "scenario", "req/s", "p50", "p99", "non-2xx"
    );
    for (name, path, bearer) in scenarios {
        let (rps, p50, p99, non_2xx) = wrk(port, path, bearer)?;
        println!("{name:<80} {rps:>10} {p50:>10} {p99:>10} {non_2xx:>8}");
    }
    Ok(())
}
