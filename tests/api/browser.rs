//! The account pages driven end to end in headless Chromium (Debian's
//! `chromium` and `chromium-driver`): open the emailed link, fill the form,
//! see the outcome, sign in.

use std::process::Stdio;
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use reqwest::{Method, StatusCode};
use serde_json::json;
use testkit::{TestApp, spawn_app};

/// A headless Chromium session through its own chromedriver.
pub(crate) struct Browser {
    pub(crate) client: Client,
    _driver: Driver,
}

/// Chromedriver, ended with every process of its group when dropped:
/// Chromium's helper processes outlive the browser otherwise, a set per test.
struct Driver(tokio::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(id) = self.0.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{id}")])
                .status();
        }
    }
}

impl Browser {
    pub(crate) async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = tokio::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // A group of its own, with the Chromium it starts: see Drop.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver installed (Debian package chromium-driver)");
        // A profile of its own: a Chromium left over from an earlier test on
        // the same port may still hold that port's profile.
        let profile =
            std::env::temp_dir().join(format!("tessera-chromium-{}", uuid::Uuid::new_v4()));
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--disable-dev-shm-usage", "--disable-breakpad", format!("--user-data-dir={}", profile.display())]
            },
            "goog:loggingPrefs": { "browser": "ALL" }
        });
        let capabilities = capabilities.as_object().unwrap().clone();
        let mut last_error = None;
        for _ in 0..50 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => {
                    return Self {
                        client,
                        _driver: Driver(driver),
                    };
                }
                Err(e) => {
                    last_error = Some(e);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        panic!("chromedriver did not answer: {last_error:?}");
    }

    /// Opens `path` of the console, signs in as the administrator on the
    /// page it sends to, and waits to be back.
    pub(crate) async fn sign_in_to(&self, app: &TestApp, path: &str) {
        self.open(app, path).await;
        self.wait_for("form[data-action=sign-in]").await;
        self.fill("email", testkit::ADMIN_EMAIL).await;
        self.fill("password", testkit::ADMIN_PASSWORD).await;
        self.submit().await;
        self.wait_for("main[data-page]").await;
    }

    /// What the page's console said at the level SEVERE (errors, failed
    /// loads) since the last call.
    pub(crate) async fn console_errors(&self) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap();
        log.as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The serious and critical violations axe-core (pinned in
    /// `tests/browser-tools`, installed by `npm ci` there) finds on the
    /// page open, each as `rule: elements`.
    pub(crate) async fn accessibility_violations(&self) -> Vec<String> {
        let source = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/browser-tools/node_modules/axe-core/axe.min.js"
        ))
        .expect("axe-core installed: npm ci in tests/browser-tools (cargo xtask test does it)");
        self.client.execute(&source, vec![]).await.unwrap();
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { resultTypes: ['violations'] })
                    .then((r) => done(r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
                        .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)))
                    .catch((e) => done([`axe failed: ${e}`]));",
                vec![],
            )
            .await
            .unwrap();
        serde_json::from_value(found).unwrap()
    }

    /// No serious or critical accessibility violation on the page open, in
    /// the light theme and in the dark one (`screen` names it in a failure).
    pub(crate) async fn accessible_in_both_themes(&self, screen: &str) {
        for theme in ["light", "dark"] {
            self.client
                .execute(
                    "document.documentElement.dataset.theme = arguments[0];",
                    vec![json!(theme)],
                )
                .await
                .unwrap();
            let violations = self.accessibility_violations().await;
            assert!(violations.is_empty(), "{screen} ({theme}): {violations:?}");
        }
    }

    pub(crate) async fn open(&self, app: &TestApp, path: &str) {
        self.client
            .goto(&format!("{}{path}", app.address))
            .await
            .unwrap();
    }

    pub(crate) async fn fill(&self, id: &str, value: &str) {
        let input = self.client.find(Locator::Id(id)).await.unwrap();
        input.clear().await.unwrap();
        input.send_keys(value).await.unwrap();
    }

    pub(crate) async fn submit(&self) {
        self.client
            .find(Locator::Css("form button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// Waits up to 15 s for an element matching `css` and answers it.
    pub(crate) async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(found) = self.client.find(Locator::Css(css)).await {
                return found;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{css} never appeared on {:?}",
                self.client.current_url().await.map(|u| u.to_string())
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the status line to show `class` and answers its text.
    /// Waits until the page shows a `class` status containing `text`; an
    /// earlier status still on the page does not count.
    pub(crate) async fn expect_status(&self, class: &str, text: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = String::new();
        while std::time::Instant::now() < deadline {
            if let Ok(status) = self
                .client
                .find(Locator::Css(&format!("#status.{class}")))
                .await
            {
                seen = status.text().await.unwrap_or_default();
                if seen.contains(text) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no {class} status with {text:?} shown (last: {seen:?})");
    }
}

/// Chromedriver's read of the browser's console log.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (Method, Option<String>) {
        (Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
    }
}

async fn point_links_at(app: &TestApp, admin: &str) {
    let base = format!("{}/admin/auth", app.address);
    let set = app
        .patch(
            "/admin/api/settings",
            admin,
            json!({ "data": { "auth.email_links_base_url": base } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK);
}

#[tokio::test]
async fn reset_password_and_sign_in_in_the_browser() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    point_links_at(&app, &admin).await;
    app.create_user(&admin, "browser@example.com", "password-1", None)
        .await;
    let browser = Browser::start().await;

    // Ask for the link from the sign-in page itself.
    browser.open(&app, "/admin/auth/sign-in").await;
    browser.fill("email", "browser@example.com").await;
    browser
        .client
        .find(Locator::Id("forgot-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.expect_status("success", "on its way").await;
    let email = app
        .smtp
        .wait_for(
            "browser@example.com",
            "reset-password",
            Duration::from_secs(20),
        )
        .await;
    let link = email.link("reset-password").unwrap();

    browser.client.goto(&link).await.unwrap();
    browser.fill("password", "browser-password-2").await;
    browser.fill("confirm", "something else").await;
    browser.submit().await;
    browser.expect_status("error", "differ").await;
    browser.fill("password", "short").await;
    browser.fill("confirm", "short").await;
    browser.submit().await;
    browser.expect_status("error", "at least 8").await;
    browser.fill("password", "browser-password-2").await;
    browser.fill("confirm", "browser-password-2").await;
    browser.submit().await;
    browser
        .expect_status("success", "password has been changed")
        .await;

    // The used link now says so.
    browser.client.goto(&link).await.unwrap();
    browser.fill("password", "browser-password-3").await;
    browser.fill("confirm", "browser-password-3").await;
    browser.submit().await;
    browser.expect_status("error", "invalid").await;

    browser.open(&app, "/admin/auth/sign-in").await;
    browser.fill("email", "browser@example.com").await;
    browser.fill("password", "browser-password-1").await;
    browser.submit().await;
    browser
        .expect_status("error", "Invalid email or password")
        .await;
    browser.fill("password", "browser-password-2").await;
    browser.submit().await;
    browser
        .expect_status("success", "Signed in as browser@example.com")
        .await;
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn a_totp_sign_in_is_typed_into_the_page() {
    let app = testkit::spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    let (_, secret, _) = crate::mfa::enrolled(&app, &admin, "twofactor@example.com").await;
    app.advance(chrono::Duration::seconds(30));
    let browser = Browser::start().await;
    browser.open(&app, "/admin/auth/sign-in").await;
    browser.fill("email", "twofactor@example.com").await;
    browser.fill("password", "password-1").await;
    browser.submit().await;
    browser
        .expect_status("success", "Enter the 6-digit code")
        .await;
    let verify = "form[data-action=mfa] button[type=submit]";
    browser.fill("code", "000000").await;
    browser.wait_for(verify).await.click().await.unwrap();
    browser.expect_status("error", "That code is wrong").await;
    browser
        .fill("code", &crate::mfa::code(&app, &secret, 0))
        .await;
    browser.wait_for(verify).await.click().await.unwrap();
    browser
        .expect_status("success", "Signed in as twofactor@example.com")
        .await;
    let session = browser
        .client
        .execute("return sessionStorage.getItem('tessera.session')", vec![])
        .await
        .unwrap();
    let me = app.get("/api/auth/me", session.as_str().unwrap()).await;
    assert_eq!(me.data()["email"], "twofactor@example.com");
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn accept_an_invitation_and_verify_an_email_in_the_browser() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    point_links_at(&app, &admin).await;
    let browser = Browser::start().await;

    let invited = app
        .post(
            "/admin/api/invitations",
            &admin,
            json!({ "data": { "email": "invitee@example.com", "roleIds": [crate::USERS_ROLE] } }),
        )
        .await;
    assert_eq!(invited.status, StatusCode::CREATED);
    let email = app
        .smtp
        .wait_for(
            "invitee@example.com",
            "accept-invitation",
            Duration::from_secs(20),
        )
        .await;
    browser
        .client
        .goto(&email.link("accept-invitation").unwrap())
        .await
        .unwrap();
    browser.fill("password", "invitee-password").await;
    browser.fill("confirm", "invitee-password").await;
    browser.submit().await;
    browser.expect_status("success", "account is ready").await;
    app.login("invitee@example.com", "invitee-password").await;

    let set = app.patch("/admin/api/settings", &admin, json!({ "data": { "auth.registration_enabled": true, "auth.email_verification_required": true } })).await;
    assert_eq!(set.status, StatusCode::OK);
    let registered = app
        .call(
            Method::POST,
            "/api/auth/register",
            None,
            Some(json!({ "email": "confirm@example.com", "password": "confirm-password" })),
        )
        .await;
    assert_eq!(registered.status, StatusCode::CREATED);
    let email = app
        .smtp
        .wait_for(
            "confirm@example.com",
            "verify-email",
            Duration::from_secs(20),
        )
        .await;
    browser
        .client
        .goto(&email.link("verify-email").unwrap())
        .await
        .unwrap();
    browser.submit().await;
    browser.expect_status("success", "confirmed").await;
    app.login("confirm@example.com", "confirm-password").await;

    // A page opened without a token says the link is invalid.
    browser.open(&app, "/admin/auth/verify-email").await;
    browser.submit().await;
    browser.expect_status("error", "invalid").await;
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn pages_forbid_referrers_and_framing() {
    let app = spawn_app().await;
    for page in [
        "sign-in",
        "reset-password",
        "verify-email",
        "accept-invitation",
    ] {
        let response = app
            .client
            .get(format!("{}/admin/auth/{page}?token=abc", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{page}");
        assert_eq!(response.headers()["referrer-policy"], "no-referrer");
        assert_eq!(response.headers()["x-frame-options"], "DENY");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let html = response.text().await.unwrap();
        assert!(
            html.contains("/admin/auth/assets/")
                && !html.contains("http://")
                && !html.contains("https://"),
            "no external assets"
        );
    }
    let html = app
        .client
        .get(format!("{}/admin/auth/sign-in", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = html.find("/admin/auth/assets/").unwrap();
    let path = &html[start..start + html[start..].find('"').unwrap()];
    assert!(path.ends_with("/auth.css"), "{path}");
    let script = app
        .client
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
}

/// Opens the API docs without a session: signs in where they send the
/// visitor, then runs getMe with "Try it out". `base` is Tessera's mount path.
async fn sign_in_to_the_docs_and_try_get_me(browser: &Browser, app: &TestApp, base: &str) {
    browser.open(app, "/admin/docs/").await;
    browser.wait_for("form[data-action=sign-in]").await;
    let url = browser.client.current_url().await.unwrap();
    assert!(
        url.as_str().ends_with(&format!(
            "{base}/admin/auth/sign-in?next={base}/admin/docs/"
        )),
        "{url}"
    );
    browser.fill("email", testkit::ADMIN_EMAIL).await;
    browser.fill("password", testkit::ADMIN_PASSWORD).await;
    browser.submit().await;

    // The document loads with the session: its operations are listed.
    let me = browser
        .wait_for("#operations-auth-getMe .opblock-summary")
        .await;
    browser.wait_for("#operations-users-listUsers").await;
    me.click().await.unwrap();
    browser
        .wait_for("#operations-auth-getMe .try-out__btn")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("#operations-auth-getMe .execute")
        .await
        .click()
        .await
        .unwrap();
    let status = browser
        .wait_for("#operations-auth-getMe .live-responses-table tbody .response-col_status")
        .await;
    assert_eq!(status.text().await.unwrap().trim(), "200");
    let body = browser
        .wait_for("#operations-auth-getMe .live-responses-table .microlight")
        .await;
    assert!(body.text().await.unwrap().contains(testkit::ADMIN_EMAIL));
}

#[tokio::test]
async fn the_api_docs_sign_in_load_the_document_and_try_it_out() {
    let app = spawn_app().await;
    let browser = Browser::start().await;
    sign_in_to_the_docs_and_try_get_me(&browser, &app, "").await;
    browser.client.close().await.unwrap();
}

/// Embedded under a path, the pages link, sign in and call the API under it.
#[tokio::test]
async fn the_pages_work_under_the_path_tessera_is_mounted_at() {
    let app = testkit::spawn_app_under("/backend").await;
    let browser = Browser::start().await;
    sign_in_to_the_docs_and_try_get_me(&browser, &app, "/backend").await;
    browser.open(&app, "/admin/").await;
    // The navigation is written by the server, the sections by the script.
    browser.wait_for("nav a[href='/backend/admin/docs/']").await;
    browser
        .wait_for("#sections a[href='/backend/admin/api/openapi']")
        .await;
    let text = browser.wait_for("#sections").await.text().await.unwrap();
    assert!(text.contains("Tables and resources"), "{text}");
    browser.client.close().await.unwrap();
}

/// A server whose public URL is its own address, at `host`: a provider
/// sends the browser to the public URL.
pub(crate) async fn spawn_app_at_public_url(host: &str) -> TestApp {
    testkit::spawn_app_with(|c| {
        let port = c.bind.rsplit(':').next().unwrap().to_owned();
        c.public_url = format!("http://{host}:{port}");
    })
    .await
}

#[tokio::test]
async fn sign_in_with_a_provider_in_the_browser() {
    let app = spawn_app_at_public_url("127.0.0.1").await;
    let mock = testkit::MockProvider::start().await;
    let admin = app.admin_session().await;
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": { "oidc": mock.settings("oidc") },
                              "auth.registration_enabled": true } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK);

    let browser = Browser::start().await;
    browser.open(&app, "/admin/auth/sign-in").await;
    let button = browser.wait_for("#providers a[data-provider=oidc]").await;
    assert_eq!(button.text().await.unwrap(), "Sign in with single sign-on");
    button.click().await.unwrap();
    browser
        .expect_status("success", "Signed in as person@example.com")
        .await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/auth/sign-in");
    assert_eq!(url.fragment(), None, "the token leaves the address bar");
    let stored = browser
        .client
        .execute("return sessionStorage.getItem('tessera.session')", vec![])
        .await
        .unwrap();
    let token = stored.as_str().unwrap();
    let me = app.get("/api/auth/me", token).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(me.data()["email"], "person@example.com");
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn the_sign_in_page_ignores_a_session_planted_in_its_address() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "attacker@example.com", "member-password-1", None)
        .await;
    // A session of the attacker's own account, sent to a victim in a link.
    let planted = app.login("attacker@example.com", "member-password-1").await;
    let browser = Browser::start().await;
    for address in [
        format!("/admin/auth/sign-in#token={planted}"),
        format!("/admin/auth/sign-in?oauth_nonce=guessed#token={planted}"),
    ] {
        browser.open(&app, &address).await;
        browser.wait_for("#providers").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stored = browser
            .client
            .execute("return sessionStorage.getItem('tessera.session')", vec![])
            .await
            .unwrap();
        assert_eq!(
            stored,
            serde_json::Value::Null,
            "{address} signed the page in"
        );
        let url = browser.client.current_url().await.unwrap();
        assert_eq!(url.fragment(), None, "the planted token leaves the address");
        let status = browser
            .client
            .find(Locator::Id("status"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap_or_default();
        assert!(!status.contains("Signed in"), "{status}");
    }
    browser.client.close().await.unwrap();
}

/// Where screenshots of browser tests are kept: `TESSERA_TEST_ARTEFACTS`,
/// else `target/test-artefacts` of the workspace.
fn artefact(name: &str) -> std::path::PathBuf {
    let dir = std::env::var_os("TESSERA_TEST_ARTEFACTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artefacts")
        });
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[tokio::test]
async fn a_dashboard_draws_every_widget_type_and_a_refusal_in_place() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (role, _) = crate::views::sales_dashboard(&app, &admin).await;
    let email = "viewer@example.com";
    app.create_user(&admin, email, "viewer-password-1", Some(vec![role]))
        .await;
    let browser = Browser::start().await;
    browser.client.set_window_size(1280, 1100).await.unwrap();

    // Anyone not signed in is sent to sign in, and comes back.
    browser.open(&app, "/admin/dashboards/sales").await;
    browser.wait_for("form[data-action=sign-in]").await;
    browser.fill("email", email).await;
    browser.fill("password", "viewer-password-1").await;
    browser.submit().await;
    browser.wait_for("[data-widget=line] canvas").await;
    let title = browser.wait_for("#title").await.text().await.unwrap();
    assert_eq!(title, "Sales");
    let zone = browser.wait_for("#zone").await.text().await.unwrap();
    assert!(zone.starts_with("Times in "), "{zone}");

    // The charts hold the view's data points, read as this user.
    let api = app.get("/api/views/sales-per-day", &admin).await;
    let rows = api.data().as_array().unwrap().clone();
    let chart = |widget: &str| {
        let script = format!(
            "const c = Chart.getChart(document.querySelector('[data-widget={widget}] canvas')); \
             return {{ type: c.config.type, labels: c.data.labels, data: c.data.datasets.map(d => d.data) }};"
        );
        let client = browser.client.clone();
        async move { client.execute(&script, vec![]).await.unwrap() }
    };
    let line = chart("line").await;
    assert_eq!(line["type"], json!("line"));
    assert_eq!(line["labels"].as_array().unwrap().len(), rows.len());
    let totals: Vec<serde_json::Value> = rows.iter().map(|r| r["total"].clone()).collect();
    let counts: Vec<serde_json::Value> = rows.iter().map(|r| r["count"].clone()).collect();
    assert_eq!(line["data"], json!([totals, counts]));
    assert_eq!(
        line["labels"][0],
        json!(&rows[0]["day"].as_str().unwrap()[..10])
    );
    let bar = chart("bar").await;
    assert_eq!(
        (bar["type"].clone(), bar["data"].clone()),
        (json!("bar"), json!([counts]))
    );
    let pie = chart("pie").await;
    assert_eq!(pie["labels"], json!(["blue", "red"]));
    assert_eq!(pie["data"], json!([[24.34, 28.49]]));
    let number = browser.wait_for("[data-widget=total] .number").await;
    let total: f64 = totals.iter().map(|t| t.as_f64().unwrap()).sum::<f64>();
    let first = rows[0]["total"].as_f64().unwrap();
    assert_ne!(total, first);
    assert_eq!(
        number.text().await.unwrap().replace(',', ""),
        format!("{first}")
    );
    let cells = browser
        .client
        .find_all(Locator::Css("[data-widget=table] tr"))
        .await
        .unwrap();
    assert_eq!(cells.len(), rows.len() + 1);

    // The widget this user may not read says so in its place.
    let refusal = browser
        .wait_for("[data-widget=secret] .widget-error[data-code=PERMISSION_DENIED]")
        .await;
    assert!(refusal.text().await.unwrap().contains("may not read"));
    let png = browser.client.screenshot().await.unwrap();
    std::fs::write(artefact("dashboard.png"), png).unwrap();
    let violations = browser.accessibility_violations().await;
    assert!(violations.is_empty(), "{violations:?}");

    // The index lists the dashboards this user may read.
    browser.open(&app, "/admin/").await;
    let link = browser.wait_for("a[href='/admin/dashboards/sales']").await;
    assert_eq!(link.text().await.unwrap(), "Sales");
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn the_console_index_shows_an_administrator_what_exists() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    crate::views::sales_dashboard(&app, &admin).await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/").await;
    let link = browser.wait_for("a[href='/admin/dashboards/sales']").await;
    assert_eq!(link.text().await.unwrap(), "Sales");
    let text = browser.wait_for("#sections").await.text().await.unwrap();
    for expected in [
        "DataViews",
        "Sales per day — /api/views/sales-per-day",
        "Tables and resources",
        "app.sales (hidden)",
        "Workflows",
        "Admin API documentation",
    ] {
        assert!(text.contains(expected), "{expected} missing from {text}");
    }
    browser.wait_for("a[href='/admin/docs/']").await;
    browser.client.close().await.unwrap();
}

/// The EventSource example of docs/realtime.md, run in a page of the
/// service: a row inserted through the Data API shows up.
#[tokio::test]
async fn a_page_following_a_table_with_event_source_shows_an_inserted_row() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    crate::realtime::notes(&app, &admin).await;
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = app.create_token(&admin, "API").await;
    let browser = Browser::start().await;
    browser.open(&app, "/admin/auth/sign-in").await;
    browser
        .client
        .execute(
            r#"const [token] = arguments;
            const list = document.createElement("ul");
            list.id = "changes";
            document.body.append(list);
            const source = new EventSource("/api/realtime?subscribe=app.notes&access_token=" + encodeURIComponent(token));
            source.addEventListener("open", () => { document.body.dataset.following = "yes"; });
            source.addEventListener("insert", (event) => {
              const { row } = JSON.parse(event.data);
              const item = document.createElement("li");
              item.textContent = row.title;
              list.append(item);
            });"#,
            vec![json!(token)],
        )
        .await
        .unwrap();
    browser.wait_for("body[data-following=yes]").await;
    crate::realtime::insert(&app, &admin, &owner, "seen in the browser").await;
    let item = browser.wait_for("#changes li").await;
    assert_eq!(item.text().await.unwrap(), "seen in the browser");
    browser.client.close().await.unwrap();
}

/// The console's tables page: a table defined in the form shows its SQL
/// first, is created and listed; a refused definition shows the reason next
/// to the form, the field marked; a column is added; exposing a method and
/// dropping after typing the name act on the API.
#[tokio::test]
async fn the_tables_page_previews_creates_exposes_and_drops_a_table() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/tables").await;
    browser.wait_for("#create-table").await;

    // A refusal: the reason shown, the field marked.
    browser.fill("new-name", "Bad Name").await;
    let row = "#new-columns tr:nth-child(1)";
    let cell = |field: &str| format!("{row} [data-field={field}]");
    browser
        .client
        .find(Locator::Css(&cell("name")))
        .await
        .unwrap()
        .send_keys("id")
        .await
        .unwrap();
    click(&browser, "#preview").await;
    let error = browser.wait_for("#create-error:not([hidden])").await;
    assert!(!error.text().await.unwrap().is_empty());
    browser.wait_for("#new-name[aria-invalid=true]").await;

    // A good definition: the SQL first, then the table. Editing withdraws
    // the mark and the refusal.
    browser.fill("new-name", "tasks").await;
    browser.wait_for("#new-name:not([aria-invalid])").await;
    browser.wait_for("#create-error[hidden]").await;
    let types = browser
        .client
        .find(Locator::Css(&cell("dataType")))
        .await
        .unwrap();
    types.clear().await.unwrap();
    types.send_keys("bigint").await.unwrap();
    click(&browser, &cell("primaryKey")).await;
    click(&browser, "#add-column-row").await;
    let second = "#new-columns tr:nth-child(2)";
    for (field, value) in [
        ("name", "title"),
        ("check", "length(title) <= 50"),
        ("checkMessage", "At most 50 characters"),
    ] {
        browser
            .client
            .find(Locator::Css(&format!("{second} [data-field={field}]")))
            .await
            .unwrap()
            .send_keys(value)
            .await
            .unwrap();
    }
    click(&browser, &format!("{second} [data-field=notNull]")).await;
    click(&browser, "#preview").await;
    let sql = browser
        .wait_for("#preview-box:not([hidden]) #preview-sql")
        .await;
    let sql = sql.text().await.unwrap();
    assert!(
        sql.contains("CREATE TABLE") && sql.contains("tasks") && sql.contains("length(title)"),
        "{sql}"
    );
    assert!(
        app.get("/admin/api/resources", &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["table"] != "tasks")
    );
    std::fs::write(
        artefact("tables-preview.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    click(&browser, "#create").await;
    browser.wait_for("li[data-table='app.tasks']").await;

    // Expose GET, add a column, then drop it after typing its name.
    click(
        &browser,
        "li[data-table='app.tasks'] input[data-method=GET]",
    )
    .await;
    let resource = wait_until(&app, &admin, |r| {
        r["table"] == "tasks" && r["exposedMethods"] == json!(["GET"])
    })
    .await;
    click(&browser, "li[data-table='app.tasks'] .manage summary").await;
    let add = "li[data-table='app.tasks'] form:nth-of-type(1)";
    browser
        .client
        .find(Locator::Css(&format!("{add} [data-field=name]")))
        .await
        .unwrap()
        .send_keys("done")
        .await
        .unwrap();
    click(&browser, &format!("{add} button")).await;
    status_shows(&browser, "Added done").await;
    let columns = app.get("/admin/api/schema/app/tables", &admin).await;
    assert!(
        columns.body.to_string().contains("\"done\""),
        "{:?}",
        columns.body
    );
    let drop = "li[data-table='app.tasks'] form:nth-of-type(2)";
    browser
        .client
        .find(Locator::Css(&format!("{drop} input")))
        .await
        .unwrap()
        .send_keys("app.tasks")
        .await
        .unwrap();
    click(&browser, &format!("{drop} button")).await;
    status_shows(&browser, "Dropped app.tasks").await;
    let gone = app
        .get(
            &format!("/admin/api/resources/{}", resource["id"].as_str().unwrap()),
            &admin,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    std::fs::write(
        artefact("tables-after.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    browser.client.close().await.unwrap();
}

/// Waits up to 10 s for the console's status line to contain `text`.
pub(crate) async fn status_shows(browser: &Browser, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while std::time::Instant::now() < deadline {
        if let Ok(status) = browser.client.find(Locator::Css("#status")).await {
            seen = status.text().await.unwrap_or_default();
            if seen.contains(text) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the status never showed {text:?} (last: {seen:?})");
}

/// Clicks the element at `css` once it is there and can take the click
/// (a page that draws again may replace it between the find and the click).
pub(crate) async fn click(browser: &Browser, css: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match browser.wait_for(css).await.click().await {
            Ok(()) => return,
            Err(e) => assert!(
                std::time::Instant::now() < deadline,
                "{css} never took a click: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits up to 5 s for a resource matching `test`; answers it.
async fn wait_until(
    app: &TestApp,
    admin: &str,
    test: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let list = app.get("/admin/api/resources", admin).await;
        if let Some(found) = list.data().as_array().unwrap().iter().find(|r| test(r)) {
            return found.clone();
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", list.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The console's rows page: insert through the new row, edit a cell in
/// place, a refused edit shows the table's check message next to the cell,
/// sort, filter and delete, all through the Data API.
#[tokio::test]
async fn the_rows_page_inserts_edits_refuses_filters_and_deletes() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = crate::data::create_table(&app, &admin, "app", "tasks", json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
        { "name": "title", "dataType": "text", "nullable": false, "check": "length(title) <= 10", "checkMessage": "Titles are at most 10 characters" },
        { "name": "points", "dataType": "integer" },
    ]))
    .await;
    crate::data::expose(&app, &admin, &resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/rows/app/tasks").await;

    // Insert two rows through the new row.
    for (title, points) in [("first", "3"), ("second", "1")] {
        let title_field = browser.wait_for(".new-row input[data-column=title]").await;
        title_field.send_keys(title).await.unwrap();
        browser
            .client
            .find(Locator::Css(".new-row input[data-column=points]"))
            .await
            .unwrap()
            .send_keys(points)
            .await
            .unwrap();
        click(&browser, "#insert").await;
        wait_for_text(&browser, "#grid tbody", title).await;
    }
    let stored = app.get("/api/data/app/tasks?sort=id", &admin).await;
    assert_eq!(stored.data()[0]["points"], 3, "{:?}", stored.body);

    // Sort by points: second first.
    click(&browser, "#grid thead th:nth-child(3) button").await;
    browser
        .wait_for("#grid thead th[aria-sort=ascending]")
        .await;
    wait_for_text(
        &browser,
        "#grid tbody tr:nth-child(2) td[data-column=title]",
        "second",
    )
    .await;

    // Edit a title in place; a too long one is refused with the check's message.
    let cell = "#grid tbody tr:nth-child(2) td[data-column=title]";
    click(&browser, cell).await;
    let field = browser.wait_for(&format!("{cell} input")).await;
    field.clear().await.unwrap();
    field.send_keys("renamed\u{E007}").await.unwrap();
    wait_for_text(&browser, cell, "renamed").await;
    let renamed = app
        .get(
            "/api/data/app/tasks?filter=%7B%22title%22%3A%7B%22eq%22%3A%22renamed%22%7D%7D",
            &admin,
        )
        .await;
    assert_eq!(
        renamed.data().as_array().unwrap().len(),
        1,
        "{:?}",
        renamed.body
    );
    click(&browser, cell).await;
    let field = browser.wait_for(&format!("{cell} input")).await;
    field.clear().await.unwrap();
    field
        .send_keys("far too long a title\u{E007}")
        .await
        .unwrap();
    let message = browser.wait_for(&format!("{cell} .cell-error")).await;
    assert_eq!(
        message.text().await.unwrap(),
        "Titles are at most 10 characters"
    );
    browser
        .wait_for(&format!("{cell} input[aria-invalid=true]"))
        .await;
    std::fs::write(
        artefact("rows-refused.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    field.send_keys("\u{E00C}").await.unwrap();

    // Filter to one row (title eq first), then delete it.
    add_rule(&browser, "title", "equals", "first").await;
    click(&browser, "#filter button[type=submit]").await;
    wait_for_text(&browser, "#count", "of 1").await;
    click(&browser, "#grid tbody tr:nth-child(2) [aria-label^=Delete]").await;
    wait_for_text(&browser, "#count", "No rows").await;
    let left = app.get("/api/data/app/tasks", &admin).await;
    assert_eq!(left.data().as_array().unwrap().len(), 1, "{:?}", left.body);
    assert_eq!(left.data()[0]["title"], "renamed");
    browser.client.close().await.unwrap();
}

/// The rows page's related rows, groups, search and CSV import: an order
/// shows its customer, a row's side panel leads to its customer and back
/// to the customer's orders, the orders group by status, a search finds
/// words, and an imported file's rows appear (a bad file names its line).
#[tokio::test]
async fn the_rows_page_shows_related_rows_groups_searches_and_imports() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let key = json!({ "name": "id", "dataType": "bigint", "primaryKey": true });
    let customers = crate::data::create_table(
        &app,
        &admin,
        "app",
        "customers",
        json!([key, { "name": "name", "dataType": "text" }]),
    )
    .await;
    let orders = crate::data::create_table(&app, &admin, "app", "orders", json!([key,
        { "name": "customer_id", "dataType": "bigint", "foreignKey": { "targetTable": "customers", "targetColumn": "id" } },
        { "name": "status", "dataType": "text" },
        { "name": "note", "dataType": "text" }])).await;
    for resource in [&customers, &orders] {
        crate::data::expose(&app, &admin, resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    }
    app.post(
        "/api/data/app/customers",
        &admin,
        json!({ "data": { "id": 1, "name": "Ada" } }),
    )
    .await;
    app.post(
        "/api/data/app/orders",
        &admin,
        json!({ "data": [
        { "id": 1, "customer_id": 1, "status": "open", "note": "rush delivery please" },
        { "id": 2, "customer_id": 1, "status": "open", "note": "gift wrap" },
        { "id": 3, "customer_id": null, "status": "paid", "note": "no rush" }] }),
    )
    .await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/rows/app/orders").await;
    wait_for_text(&browser, "#count", "of 3").await;

    choose(&browser, "embed", "customer_id → app.customers").await;
    wait_for_text(&browser, "#grid thead", "customers").await;
    wait_for_text(
        &browser,
        "#grid tbody tr:nth-child(2) td[data-embed=customers]",
        "Ada",
    )
    .await;

    // A row in the side panel; its customer followed by a click, and back
    // to the customer's orders the same way.
    click(
        &browser,
        "#grid tbody tr:nth-child(2) [aria-label^=Details]",
    )
    .await;
    wait_for_text(&browser, "#row-fields", "rush delivery please").await;
    click(&browser, "#row-related a").await;
    wait_for_text(&browser, "#title", "app.customers").await;
    wait_for_text(&browser, "#count", "of 1").await;
    click(
        &browser,
        "#grid tbody tr:nth-child(2) [aria-label^=Details]",
    )
    .await;
    wait_for_text(&browser, "#row-related", "app.orders where customer_id = 1").await;
    click(&browser, "#row-related a").await;
    wait_for_text(&browser, "#title", "app.orders").await;
    wait_for_text(&browser, "#count", "of 2").await;
    browser.open(&app, "/admin/rows/app/orders").await;
    wait_for_text(&browser, "#count", "of 3").await;

    choose(&browser, "group-by", "status").await;
    browser.fill("aggregate", "orders:count()").await;
    click(&browser, "#group button[type=submit]").await;
    wait_for_text(&browser, "#group-grid thead", "orders").await;
    wait_for_text(&browser, "#group-grid tbody", "paid").await;

    add_rule(&browser, "note", "contains the words", "rush -no").await;
    click(&browser, "#filter button[type=submit]").await;
    wait_for_text(&browser, "#count", "of 1").await;
    click(&browser, "#filter-clear").await;

    let good = std::env::temp_dir().join(format!("orders-{}.csv", uuid::Uuid::now_v7()));
    std::fs::write(&good, "id,status,note\n4,open,\"from, a file\"\n5,paid,\n").unwrap();
    let input = browser.wait_for("#import").await;
    input.send_keys(good.to_str().unwrap()).await.unwrap();
    wait_for_text(&browser, "#import-result", "Inserted 2 rows").await;
    wait_for_text(&browser, "#count", "of 5").await;
    let bad = std::env::temp_dir().join(format!("orders-{}.csv", uuid::Uuid::now_v7()));
    // The refused record comes after one whose quoted note holds a line end.
    std::fs::write(
        &bad,
        "id,status,note\n6,open,\"two\nlines\"\nseven,open,x\n",
    )
    .unwrap();
    let input = browser.wait_for("#import").await;
    input.send_keys(bad.to_str().unwrap()).await.unwrap();
    wait_for_text(&browser, "#grid-error", "Line 3").await;
    // The refused line itself, read from the file, under the reason.
    wait_for_text(&browser, "#import-line", "3: seven,open,x").await;
    browser.wait_for("#import-progress[hidden]").await;
    let _ = std::fs::remove_file(good);
    let _ = std::fs::remove_file(bad);
    let stored = app
        .get("/api/data/app/orders?aggregate=n:count()", &admin)
        .await;
    assert_eq!(stored.data()[0]["n"], 5);
    finish(browser, "rows-related.png").await;
}

/// Waits up to 10 s for the element at `css` to contain `text`.
pub(crate) async fn wait_for_text(browser: &Browser, css: &str, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while std::time::Instant::now() < deadline {
        if let Ok(found) = browser.client.find(Locator::Css(css)).await {
            seen = found.text().await.unwrap_or_default();
            if seen.contains(text) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{css} never showed {text:?} (last: {seen:?})");
}

/// Adds a rule to the filter builder at `box` (its top group) by clicks
/// and typing: `column`, the operator shown as `operator`, `value` typed.
pub(crate) async fn add_rule_in(
    browser: &Browser,
    container: &str,
    column: &str,
    operator: &str,
    value: &str,
) {
    let before = browser
        .client
        .find_all(Locator::Css(&format!("{container} .filter-rule")))
        .await
        .unwrap()
        .len();
    click(browser, &format!("{container} [data-filter-add=top]")).await;
    let rule = format!("{container} [data-rule=\"{}\"]", before + 1);
    choose_in(browser, &format!("{rule} .filter-column"), column).await;
    choose_in(browser, &format!("{rule} .filter-op"), operator).await;
    type_into(browser, &format!("{rule} input.filter-value"), value).await;
}

/// [`add_rule_in`] the rows page's filter.
async fn add_rule(browser: &Browser, column: &str, operator: &str, value: &str) {
    add_rule_in(browser, "#filter-builder", column, operator, value).await;
}

/// The console's users and roles page: a role and a user created through
/// its forms, the user's roles changed in place and the account turned off.
#[tokio::test]
async fn the_people_page_creates_a_role_and_a_user_and_changes_them() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/people").await;
    browser.wait_for("#new-role").await;

    browser.fill("role-name", "Editors").await;
    click(&browser, "#new-role button").await;
    browser.wait_for("#roles li[data-role=Editors]").await;
    browser.fill("user-email", "editor@example.com").await;
    browser.fill("user-name", "Ed").await;
    browser.fill("user-password", "editor-password-1").await;
    let editors = browser
        .client
        .find(Locator::XPath(
            "//select[@id='user-role']/option[text()='Editors']",
        ))
        .await
        .unwrap();
    editors.click().await.unwrap();
    click(&browser, "#new-user button").await;
    let row = "#users tr[data-user='editor@example.com']";
    browser
        .wait_for(&format!("{row} .chip[data-role=Editors]"))
        .await;
    let signed_in = app.login("editor@example.com", "editor-password-1").await;
    let me = app.get("/api/auth/me", &signed_in).await;
    assert_eq!(me.data()["roles"][0]["name"], "Editors", "{:?}", me.body);

    // Add to Users, remove from Editors, turn the account off.
    let users = browser
        .client
        .find(Locator::XPath(
            "//tr[@data-user='editor@example.com']//select/option[text()='Users']",
        ))
        .await
        .unwrap();
    users.click().await.unwrap();
    browser
        .wait_for(&format!("{row} .chip[data-role=Users]"))
        .await;
    click(&browser, &format!("{row} .chip[data-role=Editors] button")).await;
    wait_gone(&browser, &format!("{row} .chip[data-role=Editors]")).await;
    click(&browser, &format!("{row} input[type=checkbox]")).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let found = app.get("/admin/api/users?search=editor", &admin).await;
        let user = &found.data()[0];
        if user["active"] == false {
            let names: Vec<&str> = user["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["Users"]);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", found.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::write(
        artefact("people.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    browser.client.close().await.unwrap();
}

/// Waits up to 10 s until nothing matches `css`.
pub(crate) async fn wait_gone(browser: &Browser, css: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while browser.client.find(Locator::Css(css)).await.is_ok() {
        assert!(std::time::Instant::now() < deadline, "{css} stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sets the text box `id` to `text` at once (long JSON, typed in no time).
pub(crate) async fn set_text(browser: &Browser, id: &str, text: &str) {
    browser
        .client
        .execute(
            "document.getElementById(arguments[0]).value = arguments[1];",
            vec![json!(id), json!(text)],
        )
        .await
        .unwrap();
}

/// Replaces the text of the input at `css`, once there, as a person types
/// it (each key an input event).
pub(crate) async fn type_into(browser: &Browser, css: &str, text: &str) {
    let input = browser.wait_for(css).await;
    input.clear().await.unwrap();
    input.send_keys(text).await.unwrap();
}

/// Chooses the option showing `text` of the select `id`.
pub(crate) async fn choose(browser: &Browser, id: &str, text: &str) {
    choose_in(browser, &format!("#{id}"), text).await;
}

/// Chooses the option showing `text` of the select at `css`, once there.
pub(crate) async fn choose_in(browser: &Browser, css: &str, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let select = browser.wait_for(css).await;
        if let Ok(found) = select
            .find(Locator::XPath(&format!(".//option[text()='{text}']")))
            .await
        {
            found.click().await.unwrap();
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no option {text:?} in {css}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) fn screenshot_to(name: &str, png: Vec<u8>) {
    std::fs::write(artefact(name), png).unwrap();
}

/// Keeps a screenshot of the page as `name` and closes the browser.
pub(crate) async fn finish(browser: Browser, name: &str) {
    screenshot_to(name, browser.client.screenshot().await.unwrap());
    browser.client.close().await.unwrap();
}

/// A new service, its administrator's session, and a browser signed in to
/// the console page at `path`.
pub(crate) async fn console_at(path: &str) -> (TestApp, String, Browser) {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, path).await;
    (app, admin, browser)
}

/// The grants page: a filter typed as JSON refused in place, then a read
/// grant whose row filter is built as a rule (`$USER.id` typed as its
/// value), shown again as a rule in the matrix, and the preview as the role
/// showing what a member reads.
#[tokio::test]
async fn the_grants_page_grants_a_row_filter_and_previews_as_the_role() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    crate::data::keyed_table(
        &app,
        &admin,
        "notes",
        json!([{ "name": "owner", "dataType": "uuid" },
            { "name": "body", "dataType": "text" }]),
        &["GET", "POST"],
    )
    .await;
    let role = crate::data::create_role(&app, &admin, "Writers").await;
    let (alice, alice_session) =
        crate::data::member(&app, &admin, "alice@example.com", &role).await;
    let rows = json!({ "data": [
        { "owner": alice, "body": "alice's note" },
        { "owner": uuid::Uuid::new_v4(), "body": "someone else's" },
    ] });
    let inserted = app.post("/api/data/app/notes", &admin, rows).await;
    assert_eq!(inserted.status, StatusCode::CREATED, "{:?}", inserted.body);

    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/grants?role=Writers").await;
    wait_for_text(&browser, "#grants tbody", "No grants").await;
    choose(&browser, "grant-target", "app.notes").await;
    // A filter typed as JSON (the advanced form) on a column the table
    // lacks is refused, the box marked.
    click(&browser, "#grant-filter .filter-json summary").await;
    type_into(
        &browser,
        "#grant-filter .filter-json textarea",
        r#"{"nope": {"eq": 1}}"#,
    )
    .await;
    click(&browser, "#new-grant button[type=submit]").await;
    wait_for_text(&browser, "#grant-error", "nope is not a column").await;
    browser
        .wait_for("#grant-filter .filter-json textarea[aria-invalid=true]")
        .await;
    // That filter names no column the rules know the type of: the rules
    // say it is edited as JSON; emptied there, the rules come back.
    wait_for_text(&browser, "#grant-filter .filter-rules", "edited as JSON").await;
    browser
        .client
        .execute(
            "const box = document.querySelector('#grant-filter .filter-json textarea');
             box.value = ''; box.dispatchEvent(new Event('input'));",
            vec![],
        )
        .await
        .unwrap();
    // A rule without a column is refused before anything is sent.
    let remove = "#grant-filter [aria-label='Row filter of the new grant: remove rule 1']";
    click(&browser, "#grant-filter [data-filter-add=top]").await;
    choose_in(
        &browser,
        "#grant-filter [data-rule='1'] .filter-column",
        "Choose a column",
    )
    .await;
    click(&browser, "#new-grant button[type=submit]").await;
    wait_for_text(&browser, "#grant-error", "Choose a column for every rule").await;
    click(&browser, remove).await;
    // The rule built by clicks and typing, the variable typed as a value.
    add_rule_in(&browser, "#grant-filter", "owner", "equals", "$USER.id").await;
    let json = browser
        .client
        .execute(
            "return document.querySelector('#grant-filter .filter-json textarea').value;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(json.as_str().unwrap()).unwrap(),
        json!({ "owner": { "eq": "$USER.id" } })
    );
    browser.accessible_in_both_themes("grants").await;
    click(&browser, "#new-grant button[type=submit]").await;
    wait_for_text(&browser, "#grants tbody", "$USER.id").await;
    let grants = app
        .get(&format!("/admin/api/grants?roleId={role}"), &admin)
        .await;
    assert_eq!(
        grants.data()[0]["filter"],
        json!({ "owner": { "eq": "$USER.id" } }),
        "{:?}",
        grants.body
    );
    // The matrix shows the same filter as a rule when its cell is opened.
    click(&browser, "[data-cell='Writers app.notes read']").await;
    browser.wait_for("#matrix-edit:not([hidden])").await;
    let shown = browser
        .client
        .execute(
            "return [...document.querySelectorAll('#matrix-filter .filter-rule')].map((r) =>
                [...r.querySelectorAll('select, input')].map((c) => c.value).join(' '));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(shown, json!(["owner eq $USER.id"]));
    click(&browser, "#matrix-cancel").await;

    // Preview as the role, $USER being alice: what alice reads.
    choose(&browser, "preview-user", "alice@example.com").await;
    click(&browser, "#preview button[type=submit]").await;
    wait_for_text(&browser, "#preview-count", "1 of 1").await;
    let shown = browser
        .wait_for("#preview-rows")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        shown.contains("alice's note") && !shown.contains("someone else's"),
        "{shown}"
    );
    let own = app.get("/api/data/app/notes", &alice_session).await;
    assert_eq!(own.data()[0]["body"], "alice's note");
    finish(browser, "grants.png").await;
}

/// The workflows page: a refused definition selects the line of the field
/// named; saved, published, enabled, run in test mode with an input; the
/// run listed with its steps.
#[tokio::test]
async fn the_workflows_page_refuses_in_place_publishes_tests_and_lists_runs() {
    let (app, admin, browser) = console_at("/admin/workflows").await;
    wait_for_text(&browser, "#state", "New, not saved").await;
    let shown = browser
        .client
        .execute(
            "return document.getElementById('definition').value;",
            vec![],
        )
        .await
        .unwrap();
    let mut definition: serde_json::Value = serde_json::from_str(shown.as_str().unwrap()).unwrap();
    definition["slug"] = json!("greeter");
    definition["steps"][1]["type"] = json!("finsh");
    set_text(
        &browser,
        "definition",
        &serde_json::to_string_pretty(&definition).unwrap(),
    )
    .await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#editor-error", "steps[1].type").await;
    wait_for_text(&browser, "#editor-error", "line").await;
    let selected = browser
        .client
        .execute(
            "const box = document.getElementById('definition'); return box.value.slice(box.selectionStart, box.selectionEnd);",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        selected.as_str().unwrap().contains("\"finsh\""),
        "{selected}"
    );
    screenshot_to(
        "workflow-refused.png",
        browser.client.screenshot().await.unwrap(),
    );

    definition["steps"][1]["type"] = json!("finish");
    set_text(
        &browser,
        "definition",
        &serde_json::to_string_pretty(&definition).unwrap(),
    )
    .await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#state", "Draft").await;
    click(&browser, "#publish").await;
    wait_for_text(&browser, "#state", "Published").await;
    // New workflows are enabled: off, then on again.
    click(&browser, "#enabled").await;
    status_shows(&browser, "Disabled.").await;
    let listed = app.get("/admin/api/workflows", &admin).await;
    assert_eq!(listed.data()[0]["enabled"], false, "{:?}", listed.body);
    click(&browser, "#enabled").await;
    status_shows(&browser, "Enabled.").await;
    let listed = app.get("/admin/api/workflows", &admin).await;
    let saved = &listed.data()[0];
    assert_eq!(
        (
            saved["slug"].as_str(),
            saved["published"].as_bool(),
            saved["enabled"].as_bool()
        ),
        (Some("greeter"), Some(true), Some(true)),
        "{:?}",
        listed.body
    );

    set_text(&browser, "test-input", r#"{ "body": { "name": "Ada" } }"#).await;
    click(&browser, "#test button[type=submit]").await;
    browser
        .wait_for("#test-outcome[data-status=SUCCEEDED]")
        .await;
    wait_for_text(&browser, "#test-outcome", "Ada").await;
    let run = browser
        .wait_for("#runs details[data-status=SUCCEEDED]")
        .await;
    run.find(Locator::Css("summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(
        &browser,
        "#runs details .run-step[data-step=greet]",
        "SUCCEEDED",
    )
    .await;
    assert!(run.text().await.unwrap().contains("(test)"));
    finish(browser, "workflow-runs.png").await;
}

/// The workflows page's constructs of API.md 15: a schedule typed in shows
/// its next five runs (a bad one its refusal) and becomes the trigger; the
/// published version runs now; a run is replayed; attempts and child runs
/// are listed.
#[tokio::test]
async fn the_workflows_page_previews_a_schedule_runs_now_and_replays() {
    let (app, admin, browser) = console_at("/admin/workflows").await;
    wait_for_text(&browser, "#state", "New, not saved").await;
    type_into(&browser, "#cron", "0 6 * * 1-5").await;
    browser.wait_for("#next-runs li:nth-child(5)").await;
    let ticks = browser
        .client
        .execute(
            "return [...document.querySelectorAll('#next-runs li')].map((li) => li.dataset.at);",
            vec![],
        )
        .await
        .unwrap();
    let ticks: Vec<String> = serde_json::from_value(ticks).unwrap();
    assert_eq!(ticks.len(), 5);
    assert!(ticks.iter().all(|t| t.ends_with("T06:00:00Z")), "{ticks:?}");
    type_into(&browser, "#cron", "61 * * * *").await;
    wait_for_text(&browser, "#schedule-error", "trigger.cron").await;
    type_into(&browser, "#cron", "*/5 * * * *").await;
    type_into(&browser, "#timezone", "Europe/Paris").await;
    click(&browser, "#schedule button[type=submit]").await;
    let shown = browser
        .client
        .execute(
            "return document.getElementById('definition').value;",
            vec![],
        )
        .await
        .unwrap();
    let mut definition: serde_json::Value = serde_json::from_str(shown.as_str().unwrap()).unwrap();
    assert_eq!(definition["trigger"]["cron"], "*/5 * * * *");
    assert_eq!(definition["trigger"]["timezone"], "Europe/Paris");

    // A manual workflow calling a child, published, run now, then replayed.
    app.post(
        "/admin/api/workflows",
        &admin,
        json!({ "data": { "slug": "child", "trigger": { "type": "manual" },
        "steps": [{ "id": "f", "type": "finish", "result": "{{start.data.n}}" }] } }),
    )
    .await;
    let child = app.get("/admin/api/workflows", &admin).await.data()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.post(
        &format!("/admin/api/workflows/{child}/publish"),
        &admin,
        json!(null),
    )
    .await;
    definition["slug"] = json!("caller");
    definition["trigger"] = json!({ "type": "manual" });
    definition["steps"] = json!([
        { "id": "sub", "type": "call", "workflow": "child", "input": { "n": "{{start.data.n}}" } },
        { "id": "done", "type": "finish", "result": "{{steps.sub.result.result}}" }
    ]);
    set_text(
        &browser,
        "definition",
        &serde_json::to_string_pretty(&definition).unwrap(),
    )
    .await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#state", "Draft").await;
    click(&browser, "#publish").await;
    wait_for_text(&browser, "#state", "Published").await;
    set_text(&browser, "test-input", r#"{ "body": { "n": 7 } }"#).await;
    click(&browser, "#run-now").await;
    status_shows(&browser, "started").await;
    // The page lists the runs once started; the run ends within moments.
    tokio::time::sleep(Duration::from_millis(500)).await;
    click(&browser, "#refresh-runs").await;
    // The list may be drawn again between finding the run and clicking it:
    // a stale element is found afresh.
    let summary = "#runs details[data-status=SUCCEEDED] summary";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while let Err(error) = browser.wait_for(summary).await.click().await {
        assert!(std::time::Instant::now() < deadline, "{error:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for_text(
        &browser,
        "#runs details .run-step[data-step=sub]",
        "Call a workflow",
    )
    .await;
    click(&browser, "#runs details [data-replay]").await;
    status_shows(&browser, "started").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    click(&browser, "#refresh-runs").await;
    browser.wait_for("#runs details:nth-of-type(2)").await;
    finish(browser, "workflow-schedule.png").await;
}

/// The SQL console page: rows of a statement with parameters, and
/// PostgreSQL's refusal with its position selected in the statement.
#[tokio::test]
async fn the_sql_page_runs_a_statement_and_points_at_a_refusal() {
    let (_app, _, browser) = console_at("/admin/sql").await;
    set_text(
        &browser,
        "sql-query",
        "select n, n * $1::int as twice from generate_series(1, 3) n",
    )
    .await;
    browser.fill("sql-params", "[2]").await;
    click(&browser, "#sql button[type=submit]").await;
    wait_for_text(&browser, "#sql-summary", "3 rows").await;
    wait_for_text(&browser, "#sql-rows tbody tr:nth-child(3)", "6").await;
    wait_for_text(&browser, "#sql-rows thead", "twice (int4)").await;
    set_text(&browser, "sql-query", "select nope from pg_class").await;
    click(&browser, "#sql button[type=submit]").await;
    wait_for_text(&browser, "#sql-error", "at character 8").await;
    let selected = browser
        .client
        .execute("const box = document.getElementById('sql-query'); return [box.selectionStart, box.selectionEnd];", vec![])
        .await
        .unwrap();
    assert_eq!(selected, json!([7, 8]));
    finish(browser, "sql.png").await;
}

/// Settings (session-only keys marked, a change saved, a refusal marking
/// its key), tokens (the secret shown once, revoked), invitations (sent,
/// withdrawn) and the audit log (filtered by action), through their pages.
#[tokio::test]
async fn the_settings_tokens_invitations_and_audit_pages_work() {
    let (app, admin, browser) = console_at("/admin/settings").await;
    wait_for_text(&browser, "tr[data-setting='mcp.enabled']", "session only").await;
    wait_for_text(
        &browser,
        "tr[data-setting='sql_console.allow_api_tokens']",
        "session only",
    )
    .await;
    let plain = browser
        .wait_for("tr[data-setting='auth.lockout_minutes']")
        .await;
    assert!(!plain.text().await.unwrap().contains("session only"));
    let min = browser
        .wait_for("input[data-key='auth.password_min_length']")
        .await;
    min.clear().await.unwrap();
    min.send_keys("7").await.unwrap();
    click(&browser, "#settings button[type=submit]").await;
    browser
        .wait_for("input[data-key='auth.password_min_length'][aria-invalid=true]")
        .await;
    wait_for_text(&browser, "#settings-error", "auth.password_min_length").await;
    let min = browser
        .wait_for("input[data-key='auth.password_min_length']")
        .await;
    min.clear().await.unwrap();
    min.send_keys("12").await.unwrap();
    click(&browser, "#settings button[type=submit]").await;
    status_shows(&browser, "Saved auth.password_min_length.").await;
    let settings = app.get("/admin/api/settings", &admin).await;
    assert_eq!(settings.data()["auth.password_min_length"], 12);
    screenshot_to("settings.png", browser.client.screenshot().await.unwrap());

    browser.open(&app, "/admin/access").await;
    choose(&browser, "token-user", testkit::ADMIN_EMAIL).await;
    browser.fill("token-name", "deploy").await;
    choose(&browser, "token-plane", "ADMIN").await;
    click(&browser, "#new-token button[type=submit]").await;
    browser.wait_for("#token-secret:not([hidden])").await;
    let secret = browser.wait_for("#token-value").await.text().await.unwrap();
    assert_eq!(
        app.get("/admin/api/roles", &secret).await.status,
        StatusCode::OK
    );
    click(&browser, "tr[data-token=deploy] button").await;
    wait_gone(&browser, "tr[data-token=deploy]").await;
    assert_eq!(
        app.get("/admin/api/roles", &secret).await.status,
        StatusCode::UNAUTHORIZED
    );
    browser.fill("invite-email", "newcomer@example.com").await;
    click(&browser, "#new-invitation button[type=submit]").await;
    browser
        .wait_for("tr[data-invitation='newcomer@example.com']")
        .await;
    let invitations = app.get("/admin/api/invitations", &admin).await;
    assert_eq!(invitations.data()[0]["email"], "newcomer@example.com");
    screenshot_to("access.png", browser.client.screenshot().await.unwrap());
    click(
        &browser,
        "tr[data-invitation='newcomer@example.com'] button",
    )
    .await;
    wait_gone(&browser, "tr[data-invitation='newcomer@example.com']").await;
    let left = app.get("/admin/api/invitations", &admin).await;
    assert_eq!(left.data(), &json!([]), "{:?}", left.body);

    browser.open(&app, "/admin/audit").await;
    browser.wait_for("#audit table").await;
    browser.fill("audit-action", "settings.update").await;
    click(&browser, "#audit-filter button[type=submit]").await;
    browser
        .wait_for("#audit[data-action='settings.update'] tbody")
        .await;
    wait_for_text(&browser, "#audit tbody", "auth.password_min_length").await;
    let shown = browser.wait_for("#audit tbody").await.text().await.unwrap();
    assert!(!shown.contains("token.create"), "{shown}");
    finish(browser, "audit.png").await;
}

/// Every console page, signed in, at 360 px wide: it loads with no error in
/// the browser's console, nothing is wider than the screen but what
/// scrolls in its own box, and every control can be reached by Tab.
#[tokio::test]
async fn every_console_page_loads_without_errors_and_fits_360_pixels() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    crate::console::items(&app, &admin, &["GET", "POST"]).await;
    let browser = Browser::start().await;
    browser.client.set_window_size(360, 800).await.unwrap();
    browser.sign_in_to(&app, "/admin/").await;
    browser.console_errors().await;
    for path in crate::console::PAGES
        .iter()
        .chain(&["/admin/help/", "/admin/help/workflows"])
    {
        browser.open(&app, path).await;
        browser.wait_for("main[data-page]").await;
        // The page's reads are done when the network is quiet a moment.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let errors = browser.console_errors().await;
        assert!(errors.is_empty(), "{path}: {errors:?}");
        browser.accessible_in_both_themes(path).await;
        let wider = browser
            .client
            .execute(
                "const width = document.documentElement.clientWidth;
                 return [...document.querySelectorAll('body *')]
                    .filter((n) => !n.parentElement.closest('.scroll, pre') && n.getBoundingClientRect().right > width + 1)
                    .map((n) => n.tagName + (n.id ? '#' + n.id : '') + ' ' + Math.round(n.getBoundingClientRect().right));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(wider, json!([]), "{path}: wider than the screen");
        let fits = browser
            .client
            .execute(
                "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(fits, json!(true), "{path} scrolls sideways");
        let reachable = browser
            .client
            .execute(
                "return [...document.querySelectorAll('main button, main input, main select, main textarea')]
                    .filter((n) => n.offsetParent !== null && n.tabIndex < 0).map((n) => n.id || n.outerHTML.slice(0, 60));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(reachable, json!([]), "{path}: controls Tab skips");
        let name = path.trim_matches('/').replace('/', "-");
        screenshot_to(
            &format!("narrow-{name}.png"),
            browser.client.screenshot().await.unwrap(),
        );
    }
    browser.client.close().await.unwrap();
}

/// The tables page edits a column in place (its SQL previewed first),
/// builds an index, shows relations both ways and drops a column after its
/// name is typed; the snapshot page shows an uploaded snapshot's changes
/// and applies them.
#[tokio::test]
async fn the_tables_page_evolves_a_table_and_the_snapshot_page_applies_a_snapshot() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    for body in [
        json!({ "name": "customers", "columns": [{ "name": "id", "dataType": "bigint", "primaryKey": true }] }),
        json!({ "name": "orders", "columns": [
            { "name": "id", "dataType": "bigint", "primaryKey": true },
            { "name": "title", "dataType": "text" },
            { "name": "customer_id", "dataType": "bigint", "foreignKey": { "targetTable": "customers", "targetColumn": "id" } }] }),
    ] {
        let created = app
            .post(
                "/admin/api/schema/app/tables",
                &admin,
                json!({ "data": body }),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    }
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/tables").await;
    click(&browser, "details[data-schema-of='app.orders'] summary").await;
    let title = "form.column-edit[data-column=title]";
    browser.wait_for(title).await;
    let name = browser
        .wait_for(&format!("{title} [data-field=name]"))
        .await;
    name.clear().await.unwrap();
    name.send_keys("label").await.unwrap();
    click(&browser, &format!("{title} [data-field=notNull]")).await;
    click(&browser, &format!("{title} button[type=submit]")).await;
    let sql = browser
        .wait_for("details[data-schema-of='app.orders'] .preview:not([hidden]) pre")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        sql.contains("RENAME COLUMN \"title\" TO \"label\"") && sql.contains("SET NOT NULL"),
        "{sql}"
    );
    std::fs::write(
        artefact("tables-column-preview.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    click(
        &browser,
        "form.column-edit[data-column=title] + .preview:not([hidden]) button",
    )
    .await;
    browser
        .wait_for("form.column-edit[data-column=label]")
        .await;
    let described = app.get("/admin/api/schema/app/tables", &admin).await;
    assert!(described.body.to_string().contains("\"label\""));

    // An index, previewed then built; relations both ways.
    let index = "details[data-schema-of='app.orders'] form.index-new";
    browser
        .wait_for(&format!("{index} [data-field=columns]"))
        .await
        .send_keys("-label")
        .await
        .unwrap();
    click(&browser, &format!("{index} button[type=submit]")).await;
    click(
        &browser,
        "details[data-schema-of='app.orders'] .index-new + .preview:not([hidden]) button",
    )
    .await;
    browser.wait_for("li[data-index=orders_label_idx]").await;
    let relations = browser
        .wait_for("details[data-schema-of='app.orders'] .relations")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        relations.contains("customer_id → app.customers.id"),
        "{relations}"
    );
    click(&browser, "details[data-schema-of='app.customers'] summary").await;
    let referenced = browser
        .wait_for("details[data-schema-of='app.customers'] .relations")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        referenced.contains("app.orders.customer_id → id"),
        "{referenced}"
    );

    // A column dropped once its name is typed (its index goes with it).
    browser
        .wait_for("input[aria-label='Type label to drop the column']")
        .await
        .send_keys("label")
        .await
        .unwrap();
    let drop = browser
        .client
        .find(Locator::XPath(
            "//input[@aria-label='Type label to drop the column']/following-sibling::button",
        ))
        .await
        .unwrap();
    drop.click().await.unwrap();
    status_shows(&browser, "Dropped label").await;
    std::fs::write(
        artefact("tables-evolved.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    assert!(
        !app.get("/admin/api/schema/app/tables", &admin)
            .await
            .body
            .to_string()
            .contains("\"label\"")
    );

    // The snapshot page: download, then an uploaded snapshot's changes.
    browser.open(&app, "/admin/snapshot").await;
    click(&browser, "#download").await;
    browser.wait_for("#download-link:not([hidden])").await;
    let mut snapshot = app.get("/admin/api/snapshot", &admin).await.data().clone();
    snapshot["roles"] =
        json!([{ "name": "Auditors", "description": "Read the books", "apiAccess": true }]);
    let file = std::env::temp_dir().join(format!("tessera-snapshot-{}.json", app.db.name));
    std::fs::write(&file, snapshot.to_string()).unwrap();
    browser
        .wait_for("#snapshot-file")
        .await
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    let steps = browser
        .wait_for("#diff:not([hidden]) #steps")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(steps, "create role Auditors");
    std::fs::write(
        artefact("snapshot-diff.png"),
        browser.client.screenshot().await.unwrap(),
    )
    .unwrap();
    click(&browser, "#apply").await;
    status_shows(&browser, "Applied 1 changes").await;
    let roles = app.get("/admin/api/roles", &admin).await;
    assert!(roles.body.to_string().contains("Auditors"));
    // A step that gives administrator power shows the mark and its reason.
    let mut snapshot = app.get("/admin/api/snapshot", &admin).await.data().clone();
    for resource in snapshot["resources"].as_array_mut().unwrap() {
        if resource["schema"] == "svc" && resource["table"] == "role_members" {
            resource["exposedMethods"] = json!(["GET", "POST"]);
        }
    }
    std::fs::write(&file, snapshot.to_string()).unwrap();
    browser.open(&app, "/admin/snapshot").await;
    browser
        .wait_for("#snapshot-file")
        .await
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    let steps = browser
        .wait_for("#diff:not([hidden]) #steps")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        steps.contains("alter resource svc.role_members")
            && steps.contains("gives administrator power")
            && steps.contains("exposes svc.role_members for POST"),
        "{steps}"
    );
    browser.wait_for("#admin-power:not([hidden])").await;
    let _ = std::fs::remove_file(&file);
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn totp_is_set_up_from_the_account_page() {
    let app = testkit::spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "page@example.com", "password-1", None)
        .await;
    let browser = Browser::start().await;
    browser
        .open(&app, "/admin/auth/sign-in?next=/admin/auth/account")
        .await;
    browser.fill("email", "page@example.com").await;
    browser.fill("password", "password-1").await;
    browser.submit().await;
    wait_for_text(&browser, "#who", "Signed in as page@example.com").await;
    wait_for_text(&browser, "#sessions", "This session").await;
    browser.wait_for("#totp-start").await.click().await.unwrap();
    browser.wait_for("#totp-qr svg").await;
    let secret = browser.wait_for("#totp-secret").await.text().await.unwrap();
    let secret = crate::mfa::base32_decode(secret.trim());
    browser.fill("totp-code", "000000").await;
    browser
        .wait_for("#totp-confirm button")
        .await
        .click()
        .await
        .unwrap();
    browser.expect_status("error", "That code is wrong").await;
    browser
        .fill("totp-code", &crate::mfa::code(&app, &secret, 0))
        .await;
    browser
        .wait_for("#totp-confirm button")
        .await
        .click()
        .await
        .unwrap();
    browser
        .expect_status("success", "The authenticator app is set up")
        .await;
    let codes = browser
        .client
        .find_all(Locator::Css("#totp-codes li"))
        .await
        .unwrap();
    assert_eq!(codes.len(), 10);
    let user = app
        .get("/admin/api/users?search=page%40example.com", &admin)
        .await;
    assert_eq!(user.data()[0]["mfa"]["totp"], true, "{:?}", user.body);
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn the_people_page_shows_and_resets_second_factors() {
    let app = testkit::spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    crate::mfa::enrolled(&app, &admin, "lost-phone@example.com").await;
    let browser = Browser::start().await;
    browser.sign_in_to(&app, "/admin/people").await;
    let cell = "td[data-factors='lost-phone@example.com']";
    wait_for_text(&browser, cell, "authenticator app").await;
    click(&browser, &format!("{cell} button")).await;
    wait_for_text(&browser, cell, "none").await;
    let found = app.get("/admin/api/users?search=lost-phone", &admin).await;
    assert_eq!(found.data()[0]["mfa"]["totp"], false, "{:?}", found.body);
    browser.client.close().await.unwrap();
}

#[tokio::test]
async fn a_code_sent_by_email_is_typed_into_the_sign_in_page() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "typist@example.com", "password-1", None)
        .await;
    let browser = Browser::start().await;
    // Off: not offered.
    browser.open(&app, "/admin/auth/sign-in").await;
    browser.wait_for("#email-code-offer[hidden]").await;
    let on = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.email_code_enabled": true } }),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK);
    browser.open(&app, "/admin/auth/sign-in").await;
    browser.wait_for("#email-code-offer:not([hidden])").await;
    browser.fill("email", "typist@example.com").await;
    click(&browser, "#email-code-link").await;
    browser
        .expect_status("success", "a code is on its way")
        .await;
    let mail = app
        .smtp
        .wait_for(
            "typist@example.com",
            "/code?token=",
            Duration::from_secs(20),
        )
        .await;
    let at = mail.text.find("code is ").unwrap() + "code is ".len();
    let code = &mail.text[at..at + 6];
    browser.fill("typed-code", "000000").await;
    click(&browser, "form[data-action=email-code-typed] button").await;
    browser.expect_status("error", "That code is wrong").await;
    browser.fill("typed-code", code).await;
    click(&browser, "form[data-action=email-code-typed] button").await;
    browser
        .expect_status("success", "Signed in as typist@example.com")
        .await;
    browser.client.close().await.unwrap();
}

/// WebDriver's virtual authenticator (WebAuthn Level 2, section 11): a
/// CTAP2 platform authenticator with resident keys that verifies its user.
#[derive(Debug)]
pub(crate) struct VirtualAuthenticator;

impl WebDriverCompatibleCommand for VirtualAuthenticator {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!(
            "session/{}/webauthn/authenticator",
            session.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (Method, Option<String>) {
        let options = json!({
            "protocol": "ctap2",
            "transport": "internal",
            "hasResidentKey": true,
            "hasUserVerification": true,
            "isUserConsenting": true,
            "isUserVerified": true,
        });
        (Method::POST, Some(options.to_string()))
    }
}

#[tokio::test]
async fn a_passkey_is_added_on_the_account_page_and_signs_in() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // Browsers refuse an IP address as a relying party: the page is
    // opened at localhost, which the settings name.
    let origin = app.address.replace("127.0.0.1", "localhost");
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.passkey_rp_id": "localhost", "auth.passkey_origins": [origin] } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    app.create_user(&admin, "keyholder@example.com", "password-1", None)
        .await;
    let browser = Browser::start().await;
    browser
        .client
        .issue_cmd(VirtualAuthenticator)
        .await
        .expect("a virtual authenticator");
    browser
        .client
        .goto(&format!(
            "{origin}/admin/auth/sign-in?next=/admin/auth/account"
        ))
        .await
        .unwrap();
    browser.fill("email", "keyholder@example.com").await;
    browser.fill("password", "password-1").await;
    browser.submit().await;
    wait_for_text(&browser, "#who", "Signed in as keyholder@example.com").await;
    wait_for_text(&browser, "#passkeys", "None.").await;
    browser.fill("passkey-name", "This laptop").await;
    click(&browser, "#passkey-add button").await;
    browser
        .expect_status("success", "The passkey is added")
        .await;
    wait_for_text(&browser, "#passkeys", "This laptop").await;
    let user = app
        .get("/admin/api/users?search=keyholder%40example.com", &admin)
        .await;
    assert_eq!(user.data()[0]["mfa"]["passkeys"], 1, "{:?}", user.body);

    // Signed out, then in again with the passkey alone.
    click(&browser, "#sign-out").await;
    browser.wait_for("#passkey-offer:not([hidden])").await;
    click(&browser, "#passkey-sign-in").await;
    wait_for_text(&browser, "#who", "Signed in as keyholder@example.com").await;
    wait_for_text(&browser, "#passkeys", "last used").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "{errors:?}");
    browser.client.close().await.unwrap();
}

/// API.md 17: an administrator whose only second factor is a passkey signs
/// in with the password and then the passkey, on the sign-in page.
#[tokio::test]
async fn a_passkey_only_administrator_finishes_a_password_sign_in_with_the_passkey() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let origin = app.address.replace("127.0.0.1", "localhost");
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.passkey_rp_id": "localhost", "auth.passkey_origins": [origin] } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    app.create_user(
        &admin,
        "chief@example.com",
        "password-1",
        Some(vec![crate::ADMINS_ROLE.into()]),
    )
    .await;
    let browser = Browser::start().await;
    browser
        .client
        .issue_cmd(VirtualAuthenticator)
        .await
        .expect("a virtual authenticator");
    let sign_in = format!("{origin}/admin/auth/sign-in?next=/admin/auth/account");
    browser.client.goto(&sign_in).await.unwrap();
    browser.fill("email", "chief@example.com").await;
    browser.fill("password", "password-1").await;
    browser.submit().await;
    wait_for_text(&browser, "#who", "Signed in as chief@example.com").await;
    wait_for_text(&browser, "#passkeys", "None.").await;
    browser.fill("passkey-name", "Desk key").await;
    click(&browser, "#passkey-add button").await;
    wait_for_text(&browser, "#passkeys", "Desk key").await;
    click(&browser, "#sign-out").await;
    let on = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.mfa_required_for_admins": true } }),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK, "{:?}", on.body);

    // The password alone no longer signs in: the passkey finishes it.
    browser.client.goto(&sign_in).await.unwrap();
    browser.fill("email", "chief@example.com").await;
    browser.fill("password", "password-1").await;
    browser.submit().await;
    browser.wait_for("#mfa-passkey-offer:not([hidden])").await;
    click(&browser, "#mfa-passkey").await;
    wait_for_text(&browser, "#who", "Signed in as chief@example.com").await;
    // The password's 401 (MFA_REQUIRED) is the browser's one entry.
    let errors = browser.console_errors().await;
    assert!(
        errors
            .iter()
            .all(|e| e.contains("/api/auth/login") && e.contains("401")),
        "{errors:?}"
    );
    browser.client.close().await.unwrap();
    let audit = app
        .db
        .sql("SELECT string_agg(details::text, ' ') FROM svc.audit_log WHERE action = 'auth.login' AND details ->> 'mfa' = 'passkey'")
        .await;
    assert!(audit.is_some_and(|d| d.contains("\"method\": \"password\"")));
}

/// A new administrator's first hour, done only with clicks and typing at
/// 1400x1000: a table of three columns created and exposed, a role given
/// read with a row filter from the grants matrix, rows inserted in the grid,
/// a webhook workflow with a condition and a finish step built with the
/// cards (no JSON), published, run from the page and its run opened. A
/// screenshot per step is kept under `target/test-artefacts/journey-*`.
#[tokio::test]
async fn a_new_administrator_builds_a_backend_with_clicks_and_typing() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let browser = Browser::start().await;
    browser.client.set_window_size(1400, 1000).await.unwrap();
    let shot = |n: u32, name: &'static str| {
        let browser = &browser;
        async move {
            screenshot_to(
                &format!("journey-{n:02}-{name}.png"),
                browser.client.screenshot().await.unwrap(),
            );
        }
    };
    browser.sign_in_to(&app, "/admin/").await;
    browser.wait_for("#whoami .avatar").await;
    shot(1, "home").await;

    // A table of three columns, previewed then created, exposed for GET and POST.
    click(&browser, "a[data-nav~=tables]").await;
    browser.wait_for("#create-table").await;
    browser.fill("new-name", "orders").await;
    let column =
        |n: usize, field: &str| format!("#new-columns tr:nth-child({n}) [data-field={field}]");
    type_into(&browser, &column(1, "name"), "id").await;
    type_into(&browser, &column(1, "dataType"), "bigint").await;
    click(&browser, &column(1, "primaryKey")).await;
    click(
        &browser,
        &format!("{} option[value=ALWAYS]", column(1, "identity")),
    )
    .await;
    click(&browser, "#add-column-row").await;
    type_into(&browser, &column(2, "name"), "customer").await;
    click(&browser, &column(2, "notNull")).await;
    click(&browser, "#add-column-row").await;
    type_into(&browser, &column(3, "name"), "amount").await;
    type_into(&browser, &column(3, "dataType"), "integer").await;
    click(&browser, "#preview").await;
    browser.wait_for("#preview-box:not([hidden])").await;
    shot(2, "table-previewed").await;
    click(&browser, "#create").await;
    let entry = "li[data-table='app.orders']";
    for exposed in [json!(["GET"]), json!(["GET", "POST"])] {
        let method = exposed[exposed.as_array().unwrap().len() - 1]
            .as_str()
            .unwrap();
        click(&browser, &format!("{entry} input[data-method={method}]")).await;
        wait_until(&app, &admin, |r| {
            r["table"] == "orders" && r["exposedMethods"] == exposed
        })
        .await;
    }
    shot(3, "table-exposed").await;

    // A role, then read with a row filter from the grants matrix.
    click(&browser, "a[data-nav~=people]").await;
    browser.wait_for("#new-role").await;
    browser.fill("role-name", "Sales").await;
    click(&browser, "#new-role button").await;
    browser.wait_for("#roles li[data-role=Sales]").await;
    click(&browser, "a[data-nav~=grants]").await;
    let read = "[data-cell='Sales app.orders read']";
    click(&browser, read).await;
    browser.wait_for(&format!("{read}[data-granted]")).await;
    click(&browser, read).await;
    browser.wait_for("#matrix-edit:not([hidden])").await;
    add_rule_in(
        &browser,
        "#matrix-filter",
        "amount",
        "is greater than",
        "100",
    )
    .await;
    click(&browser, "#matrix-save").await;
    status_shows(&browser, "row filter is saved").await;
    let grants = app.get("/admin/api/grants", &admin).await;
    let filters: Vec<_> = grants
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["filter"].clone())
        .collect();
    assert_eq!(
        filters,
        vec![json!({ "amount": { "gt": 100 } })],
        "{:?}",
        grants.body
    );
    browser.wait_for(&format!("{read}[data-granted]")).await;
    shot(4, "grants-matrix").await;

    // Rows typed into the grid's new row.
    click(&browser, "a[data-nav~=tables]").await;
    click(&browser, &format!("{entry} a")).await;
    for (customer, amount) in [("Ada", "250"), ("Grace", "40")] {
        type_into(&browser, ".new-row input[data-column=customer]", customer).await;
        type_into(&browser, ".new-row input[data-column=amount]", amount).await;
        click(&browser, "#insert").await;
        wait_for_text(&browser, "#grid tbody", customer).await;
    }
    shot(5, "rows").await;

    // A webhook workflow built with the cards: a condition whose "then"
    // finishes with the amount, and a finish step after it.
    click(&browser, "a[data-nav~=workflows]").await;
    wait_for_text(&browser, "#state", "New, not saved").await;
    type_into(&browser, "#builder [data-path=slug]", "big-orders").await;
    type_into(&browser, "#builder [data-path=name]", "Big orders").await;
    // The template's two steps go; a condition and a finish come.
    for _ in 0..2 {
        click(
            &browser,
            "#builder [data-path='steps[0]'] .card-head button.danger",
        )
        .await;
    }
    let adder = "#builder [data-path=steps] > .add-step";
    choose_in(&browser, &format!("{adder} select"), "Condition").await;
    click(&browser, &format!("{adder} button")).await;
    let condition = "#builder [data-path='steps[0]']";
    click(&browser, &format!("{condition} .rules > button")).await;
    type_into(
        &browser,
        &format!("{condition} .rules input[aria-label='Rule 1: value at']"),
        "start.data.body.amount",
    )
    .await;
    choose_in(&browser, &format!("{condition} .rules select"), "gt").await;
    type_into(
        &browser,
        &format!("{condition} .rules input[aria-label='Rule 1: compared with']"),
        "100",
    )
    .await;
    let then = format!("{condition} [data-path='steps[0].then'] > .add-step");
    choose_in(&browser, &format!("{then} select"), "Finish").await;
    click(&browser, &format!("{then} button")).await;
    type_into(
        &browser,
        "#builder [data-path='steps[0].then[0].result']",
        "big: {{start.data.body.amount}}",
    )
    .await;
    choose_in(&browser, &format!("{adder} select"), "Finish").await;
    click(&browser, &format!("{adder} button")).await;
    type_into(&browser, "#builder [data-path='steps[1].result']", "small").await;
    shot(6, "workflow-built").await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#state", "Draft").await;
    click(&browser, "#publish").await;
    wait_for_text(&browser, "#state", "Published").await;
    let saved = app.get("/admin/api/workflows", &admin).await;
    let saved = &saved.data()[0];
    assert_eq!(saved["trigger"]["type"], "webhook", "{saved}");
    assert_eq!(
        saved["steps"][0]["if"],
        json!({ "start.data.body.amount": { "gt": 100 } })
    );
    assert_eq!(saved["steps"][0]["then"][0]["type"], "finish");
    assert_eq!(saved["steps"][1]["result"], "small");

    // Run from the page with a webhook's input, then the run as cards.
    type_into(&browser, "#test-input", r#"{ "body": { "amount": 250 } }"#).await;
    click(&browser, "#test button[type=submit]").await;
    browser
        .wait_for("#test-outcome[data-status=SUCCEEDED]")
        .await;
    let summary = "#runs details[data-status=SUCCEEDED] summary";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while let Err(error) = browser.wait_for(summary).await.click().await {
        assert!(std::time::Instant::now() < deadline, "{error:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for_text(&browser, "#runs details[open]", "big: 250").await;
    let show_run = || {
        browser.client.execute(
            "document.querySelector('#runs details[open]').scrollIntoView();",
            vec![],
        )
    };
    browser
        .wait_for("#runs details[open] .run-step[data-step=condition1][data-status=SUCCEEDED]")
        .await;
    show_run().await.unwrap();
    shot(7, "run").await;
    let violations = browser.accessibility_violations().await;
    assert!(violations.is_empty(), "{violations:?}");
    // The theme button: system, then light, then dark.
    click(&browser, "#theme").await;
    click(&browser, "#theme").await;
    browser.wait_for("html[data-theme=dark]").await;
    show_run().await.unwrap();
    shot(8, "run-dark").await;
    let violations = browser.accessibility_violations().await;
    assert!(violations.is_empty(), "dark: {violations:?}");
    browser.client.close().await.unwrap();
}
