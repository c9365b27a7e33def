//! The real binary: its commands, its configuration, and a graceful stop on SIGTERM.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

/// The `tessera` binary built beside the tests.
pub(crate) fn binary() -> std::path::PathBuf {
    // target/<profile>/deps/api-<hash> -> target/<profile>/tessera
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(|p| p.parent())
        .unwrap()
        .join("tessera")
}

/// A running `tessera serve`, with the PgBouncer it reaches the database
/// through when the tests run through one.
pub(crate) struct Served {
    child: tokio::process::Child,
    _pooler: Option<testkit::PgBouncer>,
}

impl std::ops::Deref for Served {
    type Target = tokio::process::Child;

    fn deref(&self) -> &tokio::process::Child {
        &self.child
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut tokio::process::Child {
        &mut self.child
    }
}

/// `tessera serve` on `database_url` and a free port, with the bootstrap
/// administrator; answers the process and its base address once it is ready.
async fn serve(database_url: &str) -> (Served, String) {
    serve_with(database_url, &[]).await
}

/// [`serve`] with more environment variables.
pub(crate) async fn serve_with(database_url: &str, env: &[(&str, &str)]) -> (Served, String) {
    start(database_url, env, Stdio::null).await
}

/// [`serve_with`] keeping everything the process writes to stdout and
/// stderr (its log) in the answered buffer.
pub(crate) async fn serve_logged(
    database_url: &str,
    env: &[(&str, &str)],
) -> (Served, String, Arc<Mutex<String>>) {
    use tokio::io::AsyncReadExt;
    let (mut child, base) = start(database_url, env, Stdio::piped).await;
    let log = Arc::new(Mutex::new(String::new()));
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let streams: [Box<dyn tokio::io::AsyncRead + Unpin + Send>; 2] =
        [Box::new(stdout), Box::new(stderr)];
    for mut stream in streams {
        let log = log.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 8192];
            while let Ok(n) = stream.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
    }
    (child, base, log)
}

/// Starts `tessera serve` with its output going to `output()` and waits
/// until it is ready. The port is free when chosen but the server binds it
/// only after migrating: when another process took it meanwhile, the server
/// exits and is started again on another port.
async fn start(
    database_url: &str,
    env: &[(&str, &str)],
    output: fn() -> Stdio,
) -> (Served, String) {
    // Through a PgBouncer of its own when the tests run through one.
    let pooler = testkit::through_pooler().then(|| {
        let url = url::Url::parse(database_url).unwrap();
        testkit::PgBouncer::start(url.host_str().unwrap(), url.port().unwrap_or(5432), 32)
    });
    let client = reqwest::Client::new();
    for _attempt in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = tokio::process::Command::new(binary());
        command.env("TESSERA_DATABASE_URL", database_url);
        if let Some(pooler) = &pooler {
            command
                .env("TESSERA_DATABASE_URL", pooler.url_for(database_url))
                .env("TESSERA_DATABASE_MIGRATE_URL", database_url)
                .env("TESSERA_DATABASE_POOLER", "transaction");
        }
        let mut child = command
            .arg("serve")
            .env("TESSERA_BIND", format!("127.0.0.1:{port}"))
            .env("TESSERA_BOOTSTRAP_ADMIN_EMAIL", "boot@example.com")
            .env("TESSERA_BOOTSTRAP_ADMIN_PASSWORD", "boot-password-1")
            .envs(env.iter().copied())
            .stdout(output())
            .stderr(output())
            .kill_on_drop(true)
            .spawn()
            .expect("the tessera binary is built (cargo build -p tessera)");
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == StatusCode::OK)
            {
                return (
                    Served {
                        child,
                        _pooler: pooler,
                    },
                    base,
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("server did not come up");
}

#[tokio::test]
async fn sigterm_lets_in_flight_requests_finish() {
    let db = testkit::TestDatabase::create().await;
    let (mut child, base) = serve(&db.url).await;
    let client = reqwest::Client::new();

    // Sign-ins cost an argon2 verification each: start several, then SIGTERM.
    let requests: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            let url = format!("{base}/api/auth/login");
            tokio::spawn(async move {
                client
                    .post(url)
                    .json(&json!({ "email": "boot@example.com", "password": "boot-password-1" }))
                    .send()
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let pid = child.id().unwrap();
    let kill = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(kill.success());
    for request in requests {
        let response = request.await.unwrap().expect("in-flight request answered");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let status = tokio::time::timeout(Duration::from_secs(35), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
    // New connections are refused once it stopped.
    assert!(client.get(format!("{base}/healthz")).send().await.is_err());
}

pub(crate) async fn tessera(args: &[&str], database_url: &str) -> std::process::Output {
    tokio::process::Command::new(binary())
        .args(args)
        .env("TESSERA_DATABASE_URL", database_url)
        .env_remove("TESSERA_BOOTSTRAP_ADMIN_EMAIL")
        .env_remove("TESSERA_BOOTSTRAP_ADMIN_PASSWORD")
        .output()
        .await
        .expect("the tessera binary is built (cargo build -p tessera)")
}

#[tokio::test]
async fn admin_create_makes_or_resets_an_administrator() {
    // A database that does not exist yet: the binary creates and migrates it.
    let db = testkit::TestDatabase::create().await;
    db.destroy().await;
    // Creating it needs CREATEDB, which the tests' own role has not.
    let url = db.superuser_url();
    let migrate = tessera(&["migrate"], &url).await;
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    let create = tessera(
        &[
            "admin",
            "create",
            "--email",
            "cli@example.com",
            "--password",
            "cli-password-1",
            "--name",
            "Cli",
        ],
        &url,
    )
    .await;
    assert!(
        create.status.success(),
        "{}",
        String::from_utf8_lossy(&create.stderr)
    );
    assert!(String::from_utf8_lossy(&create.stdout).contains("cli@example.com"));
    // Idempotent on the email: a second run resets the password.
    let reset = tessera(
        &[
            "admin",
            "create",
            "--email",
            "CLI@example.com",
            "--password",
            "cli-password-2",
        ],
        &url,
    )
    .await;
    assert!(
        reset.status.success(),
        "{}",
        String::from_utf8_lossy(&reset.stderr)
    );
    let short = tessera(
        &[
            "admin",
            "create",
            "--email",
            "x@example.com",
            "--password",
            "short",
        ],
        &url,
    )
    .await;
    assert!(!short.status.success());

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = std::env::temp_dir().join(format!("tessera-{port}.toml"));
    std::fs::write(
        &config,
        format!("database_url = \"{}\"\nbind = \"127.0.0.1:{port}\"\n", url),
    )
    .unwrap();
    let _child = tokio::process::Command::new(binary())
        .args(["--config", config.to_str().unwrap(), "serve"])
        .env_remove("TESSERA_DATABASE_URL")
        .env_remove("TESSERA_BIND")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let login = json!({ "email": "cli@example.com", "password": "cli-password-2" });
    let mut answered = None;
    for _ in 0..100 {
        if let Ok(response) = client
            .post(format!("http://127.0.0.1:{port}/api/auth/login"))
            .json(&login)
            .send()
            .await
        {
            answered = Some(response.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_file(&config);
    assert_eq!(
        answered,
        Some(StatusCode::OK),
        "served from tessera.toml and signed in with the reset password"
    );
}

#[tokio::test]
async fn two_processes_share_one_sign_in_window() {
    let db = testkit::TestDatabase::create().await;
    db.sql(
        "INSERT INTO svc.settings (key, value) VALUES ('auth.login_rate_limit_per_minute', '3') \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value RETURNING key",
    )
    .await;
    let (_first, a) = serve(&db.url).await;
    let (_second, b) = serve(&db.url).await;
    let client = reqwest::Client::new();
    let sign_in = |base: &str| {
        client
            .post(format!("{base}/api/auth/login"))
            .json(&json!({ "email": "boot@example.com", "password": "boot-password-1" }))
            .send()
    };
    // Three attempts, spread over both processes, fill the window.
    for base in [&a, &b, &a] {
        assert_eq!(sign_in(base).await.unwrap().status(), StatusCode::OK);
    }
    for base in [&b, &a] {
        let refused = sign_in(base).await.unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.headers().contains_key("retry-after"));
    }
    db.destroy().await;
}

#[tokio::test]
async fn openapi_prints_the_served_document_without_a_database() {
    let printed = tessera(&["openapi"], "postgres://nobody@127.0.0.1:1/none").await;
    assert!(printed.status.success(), "{printed:?}");
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    let app = testkit::spawn_app().await;
    let admin = app.admin_session().await;
    let served = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(printed, served.body);
}

#[tokio::test]
async fn json_logs_carry_each_request_id() {
    let db = testkit::TestDatabase::create().await;
    let (_child, base, log) = serve_logged(&db.url, &[("TESSERA_LOG_FORMAT", "json")]).await;
    let answered = reqwest::get(format!("{base}/healthz")).await.unwrap();
    let id = answered.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut logged = None;
    for _ in 0..100 {
        let mut lines = log.lock().unwrap().clone();
        // Only whole lines: the last one may still be arriving.
        lines.truncate(lines.rfind('\n').map_or(0, |end| end + 1));
        logged = lines
            .lines()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|_| panic!("not JSON: {line}"))
            })
            .find(|line| line["span"]["request_id"] == id.as_str());
        if logged.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logged = logged.expect("the request's log line");
    assert_eq!(logged["fields"]["route"], "/healthz");
    assert_eq!(logged["fields"]["status"], 200);
    db.destroy().await;
}

#[tokio::test]
async fn version_names_the_git_revision() {
    let printed = tessera(&["--version"], "postgres://nobody@127.0.0.1:1/none").await;
    assert!(printed.status.success(), "{printed:?}");
    let line = String::from_utf8_lossy(&printed.stdout).trim().to_owned();
    let expected = format!("tessera {} (", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let revision = line[expected.len()..].trim_end_matches(')');
    assert!(
        revision == "unknown"
            || (revision.len() == 12 && revision.bytes().all(|b| b.is_ascii_hexdigit())),
        "{line}"
    );
}

#[tokio::test]
async fn metrics_count_the_requests_made() {
    let db = testkit::TestDatabase::create().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bind = format!("127.0.0.1:{port}");
    let (_child, base) = serve_with(&db.url, &[("TESSERA_METRICS_BIND", bind.as_str())]).await;
    let client = reqwest::Client::new();
    for (path, times) in [("/healthz", 5), ("/no/such/page", 3), ("/api/auth/me", 2)] {
        for _ in 0..times {
            client.get(format!("{base}{path}")).send().await.unwrap();
        }
    }
    let text = client
        .get(format!("http://{bind}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let requests = |route: &str, status: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "tessera_http_requests_total"
                    && s.labels.get("route") == Some(route)
                    && s.labels.get("status") == Some(status)
                    && s.labels.get("method") == Some("GET")
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(n) | prometheus_parse::Value::Untyped(n) => n,
                ref other => panic!("{other:?}"),
            })
    };
    // The probe that waited for readiness asked /readyz, not /healthz.
    assert_eq!(requests("/healthz", "200"), Some(5.0), "{text}");
    assert_eq!(requests("unmatched", "404"), Some(3.0), "{text}");
    assert_eq!(requests("/api/auth/me", "401"), Some(2.0), "{text}");
    for gauge in [
        "tessera_db_pool_connections",
        "tessera_outbox_waiting",
        "tessera_workflow_runs_running",
        "tessera_row_events_waiting",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == gauge),
            "{gauge}: {text}"
        );
    }
    assert!(
        scrape.samples.iter().any(|s| s
            .metric
            .starts_with("tessera_http_request_duration_seconds")),
        "{text}"
    );
    db.destroy().await;
}
