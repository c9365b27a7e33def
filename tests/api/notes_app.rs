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
use testkit::spawn_app;

use crate::browser::{Browser, VirtualAuthenticator, click, wait_for_text};

/// `python3 -m http.server` over the repository, stopped when dropped.
struct StaticSite(Child);

impl Drop for StaticSite {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_owned()
}

/// Serves the repository's files at `http://localhost:<port>`; answers
/// the server and its origin once it answers.
async fn static_site() -> (StaticSite, String) {
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
        .current_dir(repository())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let site = StaticSite(child);
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

/// Signs in on the example's page with a password.
async fn sign_in(browser: &Browser, email: &str) {
    browser.wait_for("#sign-in-email").await;
    browser.fill("sign-in-email", email).await;
    browser.fill("sign-in-password", "password-1").await;
    click(browser, "#sign-in button[type=submit]").await;
    wait_for_text(browser, "#who", "Nora").await;
}

#[tokio::test]
async fn the_notes_app_signs_up_shares_live_notes_and_signs_in_with_a_passkey() {
    assert!(
        repository().join("clients/js/dist/index.js").exists(),
        "build the library first: npm ci && npm run build in clients/js (cargo xtask test does)"
    );
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let server = app.address.replace("127.0.0.1", "localhost");
    let (_site, origin) = static_site().await;
    // The example's own setup, as its README runs it (awaited: the server
    // answers it on this test's runtime).
    let setup = tokio::process::Command::new("node")
        .arg(repository().join("examples/notes-app/setup.mjs"))
        .args(["--server", &server, "--app", &origin])
        .env("TESSERA_TOKEN", &admin)
        .output()
        .await
        .expect("node");
    assert!(
        setup.status.success(),
        "{:?}: {}{}",
        setup.status,
        String::from_utf8_lossy(&setup.stdout),
        String::from_utf8_lossy(&setup.stderr)
    );
    let page = format!("{origin}/examples/notes-app/");

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
    sign_in(&first, "nora@example.com").await;

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
    sign_in(&second, "nora@example.com").await;
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
