//! The real binary: its commands, its configuration, and a graceful stop on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

fn binary() -> std::path::PathBuf {
    // target/<profile>/deps/api-<hash> -> target/<profile>/tessera
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(|p| p.parent())
        .unwrap()
        .join("tessera")
}

/// `tessera serve` on `database_url` and a free port, with the bootstrap
/// administrator; answers the process and its base address once it is ready.
async fn serve(database_url: &str) -> (tokio::process::Child, String) {
    serve_with(database_url, &[]).await
}

/// [`serve`] with more environment variables.
pub(crate) async fn serve_with(
    database_url: &str,
    env: &[(&str, &str)],
) -> (tokio::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(binary())
        .arg("serve")
        .env("TESSERA_DATABASE_URL", database_url)
        .env("TESSERA_BIND", format!("127.0.0.1:{port}"))
        .env("TESSERA_BOOTSTRAP_ADMIN_EMAIL", "boot@example.com")
        .env("TESSERA_BOOTSTRAP_ADMIN_PASSWORD", "boot-password-1")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the tessera binary is built (cargo build -p tessera)");
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
        {
            return (child, base);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
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

async fn tessera(args: &[&str], database_url: &str) -> std::process::Output {
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
    let migrate = tessera(&["migrate"], &db.url).await;
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
        &db.url,
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
        &db.url,
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
        &db.url,
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
        format!(
            "database_url = \"{}\"\nbind = \"127.0.0.1:{port}\"\n",
            db.url
        ),
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
    use tokio::io::AsyncBufReadExt;
    let db = testkit::TestDatabase::create().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(binary())
        .arg("serve")
        .env("TESSERA_DATABASE_URL", &db.url)
        .env("TESSERA_BIND", format!("127.0.0.1:{port}"))
        .env("TESSERA_LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut answered = None;
    for _ in 0..100 {
        if let Ok(response) = client.get(format!("{base}/healthz")).send().await {
            answered = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = answered.unwrap().headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let logged = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let line: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
            if line["span"]["request_id"] == id.as_str() {
                return line;
            }
        }
        panic!("the log ended before the request's line");
    })
    .await
    .unwrap();
    assert_eq!(logged["fields"]["route"], "/healthz");
    assert_eq!(logged["fields"]["status"], 200);
}
