//! Test support: a fresh database per test cloned from a migrated template,
//! the real server on a free port, and an HTTP client with helpers.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support fails loudly by design"
)]

mod cluster;
mod db;
mod oauth_mock;
mod pgbouncer;
mod smtp;

use std::sync::Arc;

use kernel::{Clock, ManualClock};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tessera::{Application, Config, Services};

pub use crate::cluster::Cluster;
pub use crate::db::{OWNER as TEST_DATABASE_OWNER, TestDatabase};
pub use crate::oauth_mock::{
    ClaimsShape, IdTokenFault, MOCK_CLIENT_ID, MOCK_CLIENT_SECRET, MockProvider, MockUser,
};
pub use crate::pgbouncer::{PgBouncer, through_pooler};
pub use crate::smtp::{ReceivedEmail, SmtpSink};

/// Password of the administrator every test app starts with.
pub const ADMIN_PASSWORD: &str = "admin-password-123";
/// Email of that administrator.
pub const ADMIN_EMAIL: &str = "admin@example.com";

/// A running server over its own database.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub address: String,
    /// A client without cookies or redirects.
    pub client: reqwest::Client,
    /// The services the server runs on, for set-up shortcuts.
    pub services: Services,
    /// The test's clock, when the app was started with a manual one.
    pub clock: Option<Arc<ManualClock>>,
    /// The SMTP server the app sends its emails to.
    pub smtp: SmtpSink,
    /// The database; dropped with the app.
    pub db: TestDatabase,
    /// The configuration the server runs with.
    pub config: Config,
    /// The pooler the server reaches the database through, with
    /// `TESSERA_TEST_POOLER=transaction`.
    pub pooler: Option<PgBouncer>,
}

/// An answer: status and JSON body (null when empty).
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// Parsed body, or null.
    pub body: Value,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl Answer {
    /// The first error's code.
    pub fn code(&self) -> &str {
        self.body["errors"][0]["code"].as_str().unwrap_or("")
    }

    /// The `data` member.
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
}

/// Starts the server on a fresh database with the system clock.
pub async fn spawn_app() -> TestApp {
    spawn(None, "", |_| {}).await
}

/// Starts Tessera embedded under `base_path` (`/backend`) in an application
/// of its own; the answer's address ends with that path.
pub async fn spawn_app_under(base_path: &str) -> TestApp {
    spawn(None, base_path, |_| {}).await
}

/// Starts the server with a manual clock the test can advance.
pub async fn spawn_app_with_clock() -> TestApp {
    let clock = Arc::new(ManualClock::new(chrono::Utc::now()));
    spawn(Some(clock), "", |_| {}).await
}

/// Starts the server after adjusting its configuration.
pub async fn spawn_app_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    spawn(None, "", configure).await
}

/// Starts the server reaching its database through PgBouncer in
/// transaction mode, whatever `TESSERA_TEST_POOLER` says.
pub async fn spawn_app_through_pooler() -> TestApp {
    spawn_on(None, ("", true), |_| {}).await
}

async fn spawn(
    clock: Option<Arc<ManualClock>>,
    base_path: &str,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    spawn_on(clock, (base_path, through_pooler()), configure).await
}

async fn spawn_on(
    clock: Option<Arc<ManualClock>>,
    (base_path, pooled): (&str, bool),
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    let db = TestDatabase::create().await;
    let smtp = SmtpSink::start().await;
    let mut config = Config::for_database(&db.url);
    // Bound now, so `configure` may name the port (a public URL) and no
    // other process takes it meanwhile.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    config.bind = listener.local_addr().expect("bound").to_string();
    config.public_url = "http://tessera.test".into();
    config.smtp_url = Some(smtp.url());
    config.mail_poll = std::time::Duration::from_millis(100);
    config.files = files::BlobsConfig::Local(
        std::env::temp_dir()
            .join("tessera-test-files")
            .join(&db.name),
    );
    // The same tests, through PgBouncer in transaction mode.
    let pooler = pooled.then(|| {
        let url = url::Url::parse(&db.url).expect("database URL");
        let bouncer = PgBouncer::start(
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(5432),
            config.database_pool_size,
        );
        config.database_migrate_url = Some(db.url.clone());
        config.database_url = bouncer.url_for(&db.url);
        config.database_transaction_pooler = true;
        bouncer
    });
    configure(&mut config);
    let app_clock: Arc<dyn Clock> = match &clock {
        Some(c) => c.clone(),
        None => Arc::new(kernel::SystemClock),
    };
    let services = Services::start(&config.services(), app_clock)
        .await
        .expect("services start");
    services
        .accounts
        .ensure_admin(ADMIN_EMAIL, ADMIN_PASSWORD, Some("Admin".into()))
        .await
        .expect("admin");
    let port = if base_path.is_empty() {
        let app = Application::listening(listener, &config, &services).expect("server builds");
        let port = app.port();
        tokio::spawn(app.run_until_stopped());
        port
    } else {
        embed(&config, &services, base_path, listener)
    };
    let address = format!("http://127.0.0.1:{port}{base_path}");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    TestApp {
        address,
        client,
        services,
        clock,
        smtp,
        db,
        config,
        pooler,
    }
}

/// Serves `services` under `base_path` in an application of the test's own,
/// as a host service would; answers the port.
fn embed(
    config: &Config,
    services: &Services,
    base_path: &str,
    listener: std::net::TcpListener,
) -> u16 {
    let tessera = tessera::Tessera::new(config, services, base_path).expect("embeds");
    tessera.start_workers().expect("workers start");
    let port = listener.local_addr().expect("bound").port();
    let server = actix_web::HttpServer::new(move || actix_web::App::new().service(tessera.scope()))
        .listen(listener)
        .expect("listens")
        .run();
    tokio::spawn(server);
    port
}

impl TestApp {
    /// Starts a second server on this app's database and file storage, as
    /// another instance of a deployment would run (it logs its emails instead
    /// of sending them); answers its base address.
    pub async fn spawn_peer(&self) -> String {
        let mut config = self.config.clone();
        config.smtp_url = None;
        config.bind = "127.0.0.1:0".into();
        let services = Services::start(&config.services(), Arc::new(kernel::SystemClock))
            .await
            .expect("peer services start");
        let app = Application::build(&config, &services).expect("peer builds");
        let address = format!("http://127.0.0.1:{}", app.port());
        tokio::spawn(app.run_until_stopped());
        address
    }

    /// Sends `method path` with an optional bearer and JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let mut request = self
            .client
            .request(method, format!("{}{}", self.address, path));
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request sent");
        Self::answer(response).await
    }

    /// Reads a response into an [`Answer`].
    pub async fn answer(response: reqwest::Response) -> Answer {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body read");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Answer {
            status,
            body,
            headers,
        }
    }

    /// GET with a bearer.
    pub async fn get(&self, path: &str, bearer: &str) -> Answer {
        self.call(Method::GET, path, Some(bearer), None).await
    }

    /// POST a JSON body with a bearer.
    pub async fn post(&self, path: &str, bearer: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(bearer), Some(body))
            .await
    }

    /// PATCH a JSON body with a bearer.
    pub async fn patch(&self, path: &str, bearer: &str, body: Value) -> Answer {
        self.call(Method::PATCH, path, Some(bearer), Some(body))
            .await
    }

    /// DELETE with a bearer.
    pub async fn delete(&self, path: &str, bearer: &str) -> Answer {
        self.call(Method::DELETE, path, Some(bearer), None).await
    }

    /// Signs in; answers the raw login answer.
    pub async fn login_answer(&self, email: &str, password: &str) -> Answer {
        self.call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({ "email": email, "password": password })),
        )
        .await
    }

    /// Signs in and answers the session token; panics on failure.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let answer = self.login_answer(email, password).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "login of {email} failed: {:?}",
            answer.body
        );
        answer.data()["token"].as_str().expect("token").to_owned()
    }

    /// A session token of the built-in administrator.
    pub async fn admin_session(&self) -> String {
        self.login(ADMIN_EMAIL, ADMIN_PASSWORD).await
    }

    /// Creates a user with a verified email through the Admin API (with
    /// `roleIds` when given) and answers its id.
    pub async fn create_user(
        &self,
        admin: &str,
        email: &str,
        password: &str,
        role_ids: Option<Vec<String>>,
    ) -> String {
        let mut data = json!({
            "email": email,
            "password": password,
            "name": "Test User",
            "emailVerified": true,
        });
        if let Some(roles) = role_ids {
            data["roleIds"] = json!(roles);
        }
        let answer = self
            .post("/admin/api/users", admin, json!({ "data": data }))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "create user failed: {:?}",
            answer.body
        );
        answer.data()["id"].as_str().expect("id").to_owned()
    }

    /// Creates a personal access token for the session's user and answers the secret.
    pub async fn create_token(&self, session: &str, plane: &str) -> String {
        let answer = self
            .post(
                "/api/auth/tokens",
                session,
                json!({ "name": "test", "lifetimeDays": 30, "plane": plane }),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "create token failed: {:?}",
            answer.body
        );
        answer.data()["token"].as_str().expect("token").to_owned()
    }

    /// Waits for an email to `to` carrying a link to `page`; answers its token.
    pub async fn emailed_token(&self, to: &str, page: &str) -> String {
        let email = self
            .smtp
            .wait_for(to, page, std::time::Duration::from_secs(20))
            .await;
        email.token(page).expect("link with a token")
    }

    /// Moves the manual clock forward.
    pub fn advance(&self, by: chrono::Duration) {
        self.clock
            .as_ref()
            .expect("app started with a manual clock")
            .advance(by);
    }
}
