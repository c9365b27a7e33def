//! The example app of `examples/notes-app` in headless Chromium, on the
//! library's built module (`clients/js/dist`, built by `cargo xtask test`)
//! and set up by its own `setup.mjs`: sign up, confirm the email, sign in,
//! notes of the signed-in person only, an attachment, live updates in a
//! second browser, a passkey added and used, sign out.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::json;
use testkit::{TestApp, spawn_app};

use crate::browser::{Browser, VirtualAuthenticator, click, wait_for_text};

/// `python3 -m http.server` over a copy of the example beside the
/// repository's `clients`, stopped (and the copy removed) when dropped.
struct StaticSite(Child, PathBuf);

impl Drop for StaticSite {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_owned()
}

/// A site of this test's own: `examples/notes-app` copied (each test's
/// `setup.mjs` writes its own `config.js`) beside a link to the
/// repository's `clients`, served at `http://localhost:<port>`; answers
/// the server and its origin once it answers.
async fn static_site() -> (StaticSite, String) {
    let root = std::env::temp_dir().join(format!("notes-app-{}", uuid::Uuid::new_v4()));
    let copy = root.join("examples/notes-app");
    std::fs::create_dir_all(&copy).unwrap();
    std::os::unix::fs::symlink(repository().join("clients"), root.join("clients")).unwrap();
    for entry in std::fs::read_dir(repository().join("examples/notes-app")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() && entry.file_name() != "config.js" {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let site = StaticSite(child, root);
    let origin = format!("http://localhost:{port}");
    for _ in 0..100 {
        if reqwest::get(format!("{origin}/examples/notes-app/index.html"))
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
        {
            return (site, origin);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the static site did not start");
}

/// Signs in on the example's page with a password; `who` is shown then.
async fn sign_in(browser: &Browser, email: &str, who: &str) {
    browser.wait_for("#sign-in-email").await;
    browser.fill("sign-in-email", email).await;
    browser.fill("sign-in-password", "password-1").await;
    click(browser, "#sign-in button[type=submit]").await;
    wait_for_text(browser, "#who", who).await;
}

/// The example served and set up against `app` by its own `setup.mjs`, as
/// its README runs it: the static site (served while it lives), the
/// page's address and the role new accounts join.
async fn example(app: &TestApp, admin: &str) -> (StaticSite, String, String) {
    assert!(
        repository().join("clients/js/dist/index.js").exists(),
        "build the library first: npm ci && npm run build in clients/js (cargo xtask test does)"
    );
    let server = app.address.replace("127.0.0.1", "localhost");
    let (site, origin) = static_site().await;
    // Awaited: the server answers it on this test's runtime.
    let setup = tokio::process::Command::new("node")
        .arg(site.1.join("examples/notes-app/setup.mjs"))
        .args(["--server", &server, "--app", &origin])
        .env("TESSERA_TOKEN", admin)
        .output()
        .await
        .expect("node");
    let said = String::from_utf8_lossy(&setup.stdout).into_owned();
    assert!(
        setup.status.success(),
        "{:?}: {said}{}",
        setup.status,
        String::from_utf8_lossy(&setup.stderr)
    );
    let role = said
        .split("join role ")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .expect("the role in setup's answer")
        .to_owned();
    (site, format!("{origin}/examples/notes-app/"), role)
}

#[tokio::test]
async fn the_notes_app_signs_up_shares_live_notes_and_signs_in_with_a_passkey() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_site, page, _) = example(&app, &admin).await;

    let first = Browser::start().await;
    first
        .client
        .issue_cmd(VirtualAuthenticator)
        .await
        .expect("a virtual authenticator");
    first.client.goto(&page).await.unwrap();
    first.wait_for("#sign-up-email").await;
    first.fill("sign-up-name", "Nora").await;
    first.fill("sign-up-email", "nora@example.com").await;
    first.fill("sign-up-password", "password-1").await;
    click(&first, "#sign-up button[type=submit]").await;
    wait_for_text(&first, "#status", "Confirm your email").await;
    // Before the address is confirmed, signing in says so.
    first.fill("sign-in-email", "nora@example.com").await;
    first.fill("sign-in-password", "password-1").await;
    click(&first, "#sign-in button[type=submit]").await;
    wait_for_text(&first, "#status", "EMAIL_NOT_VERIFIED").await;
    let mail = app
        .smtp
        .wait_for("nora@example.com", "token=", Duration::from_secs(20))
        .await;
    // The link's page, on this test's server (the emailed base is the
    // test configuration's).
    let link = url::Url::parse(&mail.link("verify-email").expect("the verification link")).unwrap();
    let page_of_link = format!(
        "{}{}?{}",
        app.address,
        link.path(),
        link.query().unwrap_or_default()
    );
    first.client.goto(&page_of_link).await.unwrap();
    first.submit().await;
    first.expect_status("success", "confirmed").await;
    first.client.goto(&page).await.unwrap();
    sign_in(&first, "nora@example.com", "Nora").await;

    // A note with an attachment, stored as the person's own.
    let attachment = std::env::temp_dir().join(format!("note-{}.txt", uuid::Uuid::new_v4()));
    std::fs::write(&attachment, "milk, eggs").unwrap();
    first.fill("note-title", "Buy milk").await;
    first
        .client
        .find(Locator::Id("note-attachment"))
        .await
        .unwrap()
        .send_keys(&attachment.display().to_string())
        .await
        .unwrap();
    click(&first, "#new-note button[type=submit]").await;
    wait_for_text(&first, "#notes", "Buy milk").await;
    let stored = app
        .db
        .sql("SELECT f.name FROM app.notes n JOIN svc.files f ON f.id = n.attachment_id WHERE n.title = 'Buy milk'")
        .await;
    assert_eq!(
        stored.as_deref(),
        attachment.file_name().and_then(|n| n.to_str())
    );
    // Someone else's note is not shown (the grant's row filter).
    app.db
        .sql("INSERT INTO app.notes (title, owner_id) VALUES ('Not yours', gen_random_uuid())")
        .await;

    // A second browser signed in as the same person sees a new note arrive.
    let second = Browser::start().await;
    second.client.goto(&page).await.unwrap();
    sign_in(&second, "nora@example.com", "Nora").await;
    wait_for_text(&second, "#notes", "Buy milk").await;
    second.wait_for("#live:not([hidden])").await;
    let notes = second.wait_for("#notes").await.text().await.unwrap();
    assert!(!notes.contains("Not yours"), "{notes}");
    first.fill("note-title", "Call Bo").await;
    let added = Instant::now();
    click(&first, "#new-note button[type=submit]").await;
    wait_for_text(&second, "#notes", "Call Bo").await;
    assert!(
        added.elapsed() < Duration::from_secs(3),
        "{:?}",
        added.elapsed()
    );

    // A passkey, then signing in with it alone.
    click(&first, "#add-passkey").await;
    wait_for_text(&first, "#status", "Passkey added").await;
    click(&first, "#sign-out").await;
    first.wait_for("#signed-out:not([hidden])").await;
    click(&first, "#passkey-sign-in").await;
    wait_for_text(&first, "#who", "Nora").await;
    let used = app
        .get("/admin/api/users?search=nora%40example.com", &admin)
        .await;
    assert_eq!(used.data()[0]["mfa"]["passkeys"], 1, "{:?}", used.body);
    // No error in either page but the sign-in refused on purpose above.
    for browser in [&first, &second] {
        let errors: Vec<String> = browser
            .console_errors()
            .await
            .into_iter()
            .filter(|e| !(e.contains("/api/auth/login") && e.contains("403")))
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    std::fs::remove_file(&attachment).ok();
}

/// A person signs in with a provider from the example's button and comes
/// back signed in; a person with TOTP takes the second step with a
/// recovery code, adds a passkey, and then takes it with the passkey.
#[tokio::test]
async fn the_notes_app_signs_in_with_a_provider_and_takes_the_second_step() {
    let app = crate::browser::spawn_app_at_public_url("localhost").await;
    let admin = app.admin_session().await;
    let (_site, page, role) = example(&app, &admin).await;
    let mock = testkit::MockProvider::start().await;
    mock.set_user(testkit::MockUser {
        subject: "5001".into(),
        email: "pat@example.com".into(),
        email_verified: true,
        name: "Pat Person".into(),
    });
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": { "oidc": mock.settings("oidc") } } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);

    let browser = Browser::start().await;
    browser
        .client
        .issue_cmd(VirtualAuthenticator)
        .await
        .expect("a virtual authenticator");
    browser.client.goto(&page).await.unwrap();
    click(&browser, "#providers button[data-provider=oidc]").await;
    wait_for_text(&browser, "#who", "Pat Person").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.fragment(), None, "the token leaves the address bar");
    assert_eq!(url.query(), None, "and so does the nonce");
    // The new person's notes page works under the role setup made.
    browser.wait_for("#live:not([hidden])").await;
    // A second tab shares the session, and follows a sign-out in the first.
    let first_tab = browser.client.window().await.unwrap();
    let tab = browser.client.new_window(true).await.unwrap();
    browser.client.switch_to_window(tab.handle).await.unwrap();
    browser.client.goto(&page).await.unwrap();
    wait_for_text(&browser, "#who", "Pat Person").await;
    let second_tab = browser.client.window().await.unwrap();
    browser
        .client
        .switch_to_window(first_tab.clone())
        .await
        .unwrap();
    click(&browser, "#sign-out").await;
    browser.wait_for("#signed-out:not([hidden])").await;
    browser.client.switch_to_window(second_tab).await.unwrap();
    browser.wait_for("#signed-out:not([hidden])").await;
    browser.client.close_window().await.unwrap();
    browser.client.switch_to_window(first_tab).await.unwrap();

    // An account with TOTP: the password, then a recovery code.
    app.create_user(&admin, "tia@example.com", "password-1", Some(vec![role]))
        .await;
    let session = app.login("tia@example.com", "password-1").await;
    let started = app.post("/api/auth/mfa/totp", &session, json!({})).await;
    let secret = crate::mfa::base32_decode(started.data()["secret"].as_str().unwrap());
    let code = format!(
        "{:06}",
        auth::totp_code(&secret, auth::totp_step(chrono::Utc::now()))
    );
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &session,
            json!({ "code": code }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    let recovery = confirmed.data()["recoveryCodes"][0]
        .as_str()
        .unwrap()
        .to_owned();
    async fn password_then(browser: &Browser) {
        browser.fill("sign-in-email", "tia@example.com").await;
        browser.fill("sign-in-password", "password-1").await;
        click(browser, "#sign-in button[type=submit]").await;
        browser.wait_for("#second-step:not([hidden])").await;
    }
    password_then(&browser).await;
    browser.fill("code", &recovery).await;
    click(&browser, "#second-step button[type=submit]").await;
    wait_for_text(&browser, "#who", "Test User").await;

    // A passkey added from that session finishes the next sign-in.
    click(&browser, "#add-passkey").await;
    wait_for_text(&browser, "#status", "Passkey added").await;
    click(&browser, "#sign-out").await;
    browser.wait_for("#signed-out:not([hidden])").await;
    password_then(&browser).await;
    click(&browser, "#second-step-passkey").await;
    wait_for_text(&browser, "#who", "Test User").await;
    let logins = app
        .get("/admin/api/audit?action=auth.login&limit=50", &admin)
        .await;
    let methods: Vec<(String, String)> = logins
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["details"]["method"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                e["details"]["mfa"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for expected in [("password", "recovery_code"), ("password", "passkey")] {
        assert!(
            methods
                .iter()
                .any(|(m, f)| (m.as_str(), f.as_str()) == expected),
            "{expected:?} in {methods:?}"
        );
    }
    // No error but the two password sign-ins held at a challenge (401).
    let errors: Vec<String> = browser
        .console_errors()
        .await
        .into_iter()
        .filter(|e| !(e.contains("/api/auth/login") && e.contains("401")))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
