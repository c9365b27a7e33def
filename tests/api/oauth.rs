//! Sign-in with a provider (API.md section 3a) against the testkit's mock
//! OAuth 2.0 / OpenID Connect provider: every provider kind, account
//! matching, single-use states, ID token checks and open-redirect attempts.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{
    ClaimsShape, IdTokenFault, MOCK_CLIENT_ID, MockProvider, MockUser, TestApp, spawn_app,
};
use url::Url;

/// The public URL of every test app, and a page under it to come back to.
const PUBLIC: &str = "http://tessera.test";
const BACK: &str = "http://tessera.test/admin/auth/sign-in";

async fn configure(app: &TestApp, settings: Value) {
    let admin = app.admin_session().await;
    let set = app
        .patch("/admin/api/settings", &admin, json!({ "data": settings }))
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
}

/// Points `provider` at the mock; registration as given.
async fn enable(app: &TestApp, mock: &MockProvider, provider: &str, registration: bool) {
    configure(
        app,
        json!({ "auth.oauth": { provider: mock.settings(provider) },
                "auth.registration_enabled": registration }),
    )
    .await;
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn start(app: &TestApp, provider: &str, redirect_to: &str) -> reqwest::Response {
    app.client
        .get(format!("{}/api/auth/oauth/{provider}", app.address))
        .query(&[("redirect_to", redirect_to)])
        .send()
        .await
        .unwrap()
}

/// The browser's part up to the callback: start, then the provider's
/// authorize answer. Answers the callback URL on the test server.
async fn to_callback(app: &TestApp, provider: &str) -> String {
    let started = start(app, provider, BACK).await;
    assert_eq!(
        started.status(),
        StatusCode::FOUND,
        "{:?}",
        started.text().await
    );
    let authorized = app.client.get(location(&started)).send().await.unwrap();
    assert_eq!(authorized.status(), StatusCode::FOUND);
    let callback = location(&authorized);
    assert!(
        callback.starts_with(&format!("{PUBLIC}/api/auth/oauth/{provider}/callback?")),
        "{callback}"
    );
    callback.replacen(PUBLIC, &app.address, 1)
}

async fn get(app: &TestApp, url: &str) -> reqwest::Response {
    app.client.get(url).send().await.unwrap()
}

/// The `key=value` of the fragment the callback redirected to, after checking
/// that it goes back to `BACK` and carries nothing in its query.
fn outcome(response: &reqwest::Response) -> (String, String) {
    assert_eq!(response.status(), StatusCode::FOUND);
    let to = Url::parse(&location(response)).unwrap();
    assert_eq!(
        format!("{}{}", to.origin().ascii_serialization(), to.path()),
        BACK
    );
    assert_eq!(to.query(), None, "nothing in the query string");
    let (key, value) = to.fragment().unwrap().split_once('=').unwrap();
    (key.to_owned(), value.to_owned())
}

/// A whole flow; answers the fragment's `(key, value)`.
async fn sign_in(app: &TestApp, provider: &str) -> (String, String) {
    let callback = to_callback(app, provider).await;
    outcome(&get(app, &callback).await)
}

/// A whole flow that must be refused; answers the error code.
async fn refusal(app: &TestApp, provider: &str) -> String {
    let (key, value) = sign_in(app, provider).await;
    assert_eq!(key, "error", "refused");
    value
}

async fn token_of(app: &TestApp, provider: &str) -> String {
    let (key, value) = sign_in(app, provider).await;
    if key != "token" {
        let refused = audit_actions(app, "auth.login_failed").await;
        panic!("{provider} sign-in refused with {value}: {refused:?}");
    }
    value
}

/// What `GET /api/auth/oauth` answers.
async fn providers(app: &TestApp) -> Value {
    let url = format!("{}/api/auth/oauth", app.address);
    get(app, &url).await.json().await.unwrap()
}

fn person(subject: &str, email: &str, verified: bool) -> MockUser {
    MockUser {
        subject: subject.into(),
        email: email.into(),
        email_verified: verified,
        name: "Pat Person".into(),
    }
}

async fn audit_actions(app: &TestApp, action: &str) -> Vec<Value> {
    let admin = app.admin_session().await;
    let log = app
        .get(&format!("/admin/api/audit?action={action}"), &admin)
        .await;
    log.data().as_array().unwrap().clone()
}

#[tokio::test]
async fn each_provider_kind_signs_a_new_person_in() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    let cases = [("google", "1001"), ("github", "1002"), ("oidc", "1003")];
    for (provider, subject) in cases {
        enable(&app, &mock, provider, true).await;
        let email = format!("{provider}@example.com");
        mock.set_user(person(subject, &email, true));
        let token = token_of(&app, provider).await;

        let asked = mock.last_authorize();
        assert_eq!(asked["response_type"], "code");
        assert_eq!(asked["client_id"], MOCK_CLIENT_ID);
        assert_eq!(asked["code_challenge_method"], "S256");
        assert_eq!(
            asked["redirect_uri"],
            format!("{PUBLIC}/api/auth/oauth/{provider}/callback")
        );
        assert!(asked["state"].len() >= 22, "state of 128 bits or more");
        assert!(asked["code_challenge"].len() >= 43);
        if provider == "oidc" {
            assert!(asked["nonce"].len() >= 22);
            let scope = &asked["scope"];
            assert!(
                scope.contains("openid") && scope.contains("email"),
                "{scope}"
            );
        }

        let me = app.get("/api/auth/me", &token).await;
        assert_eq!(me.status, StatusCode::OK);
        assert_eq!(me.data()["email"], email.as_str());
        assert_eq!(me.data()["emailVerified"], true);
        assert_eq!(me.data()["name"], "Pat Person");
        let sessions = app.get("/api/auth/sessions", &token).await;
        assert_eq!(sessions.data().as_array().unwrap().len(), 1);
        assert_eq!(sessions.data()[0]["current"], true);

        let admin = app.admin_session().await;
        let user_id = me.data()["id"].as_str().unwrap();
        let linked = app
            .get(&format!("/admin/api/users/{user_id}/identities"), &admin)
            .await;
        assert_eq!(linked.status, StatusCode::OK);
        assert_eq!(linked.data()[0]["provider"], provider);
        assert_eq!(linked.data()[0]["subject"], subject);
    }
    let registered = audit_actions(&app, "auth.register").await;
    assert_eq!(registered.len(), 3);
    assert!(
        registered
            .iter()
            .any(|e| e["details"]["provider"] == "github")
    );
    // The secret is write-only.
    let admin = app.admin_session().await;
    let settings = app.get("/admin/api/settings", &admin).await;
    assert!(settings.data()["auth.oauth"]["oidc"]["clientSecret"].is_null());
    assert_eq!(
        settings.data()["auth.oauth"]["oidc"]["clientId"],
        MOCK_CLIENT_ID
    );
    // The providers a sign-in page shows.
    let listed = providers(&app).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 3);
    assert_eq!(listed["data"][2]["startUrl"], "/api/auth/oauth/oidc");
}

#[tokio::test]
async fn a_verified_email_links_the_account_and_an_unverified_one_never_does() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    let admin = app.admin_session().await;
    let user_id = app
        .create_user(&admin, "person@example.com", "password-123", None)
        .await;
    for provider in ["github", "oidc"] {
        enable(&app, &mock, provider, true).await;
        mock.set_user(person("2001", "PERSON@example.com", false));
        assert_eq!(refusal(&app, provider).await, "OAUTH_FAILED");
    }
    let linked = app
        .get(&format!("/admin/api/users/{user_id}/identities"), &admin)
        .await;
    assert_eq!(linked.data(), &json!([]), "never linked unverified");
    let refused = audit_actions(&app, "auth.login_failed").await;
    assert!(
        refused
            .iter()
            .any(|e| e["details"]["reason"] == "email_not_verified")
    );

    mock.set_user(person("2001", "PERSON@example.com", true));
    let token = token_of(&app, "oidc").await;
    let me = app.get("/api/auth/me", &token).await;
    assert_eq!(me.data()["id"], user_id.as_str());
    assert_eq!(audit_actions(&app, "auth.identity_link").await.len(), 1);

    // Linked now: the identity leads to the account whatever email it gives.
    mock.set_user(person("2001", "renamed@example.org", true));
    let again = token_of(&app, "oidc").await;
    assert_eq!(
        app.get("/api/auth/me", &again).await.data()["id"],
        user_id.as_str()
    );
    let linked = app
        .get(&format!("/admin/api/users/{user_id}/identities"), &admin)
        .await;
    assert_eq!(linked.data().as_array().unwrap().len(), 1);
    assert_eq!(linked.data()[0]["email"], "renamed@example.org");

    // Removed by an administrator, it no longer signs in without a match.
    let identity = linked.data()[0]["id"].as_str().unwrap();
    let path = format!("/admin/api/users/{user_id}/identities/{identity}");
    assert_eq!(
        app.delete(&path, &admin).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete(&path, &admin).await.status,
        StatusCode::NOT_FOUND
    );
    configure(&app, json!({ "auth.registration_enabled": false })).await;
    assert_eq!(refusal(&app, "oidc").await, "PERMISSION_DENIED");
}

#[tokio::test]
async fn refused_accounts_come_back_with_the_error_in_the_fragment() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    enable(&app, &mock, "google", false).await;
    mock.set_user(person("3001", "stranger@example.com", true));
    assert_eq!(
        refusal(&app, "google").await,
        "PERMISSION_DENIED",
        "registration off"
    );
    let admin = app.admin_session().await;
    let users = app.get("/admin/api/users?search=stranger", &admin).await;
    assert_eq!(users.data(), &json!([]));

    let user_id = app
        .create_user(&admin, "inactive@example.com", "password-123", None)
        .await;
    let off = app
        .patch(
            &format!("/admin/api/users/{user_id}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK);
    mock.set_user(person("3002", "inactive@example.com", true));
    assert_eq!(refusal(&app, "google").await, "OAUTH_FAILED");

    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Kiosk", "apiAccess": false } }),
        )
        .await;
    let role_id = role.data()["id"].as_str().unwrap().to_owned();
    app.create_user(
        &admin,
        "kiosk@example.com",
        "password-123",
        Some(vec![role_id]),
    )
    .await;
    mock.set_user(person("3003", "kiosk@example.com", true));
    assert_eq!(refusal(&app, "google").await, "PERMISSION_DENIED");
    let reasons: Vec<Value> = audit_actions(&app, "auth.login_failed")
        .await
        .iter()
        .map(|e| e["details"]["reason"].clone())
        .collect();
    for reason in ["registration_off", "inactive", "no_api_access"] {
        assert!(reasons.contains(&json!(reason)), "{reason} in {reasons:?}");
    }
}

#[tokio::test]
async fn a_state_is_single_use_fresh_and_of_its_provider() {
    let app = testkit::spawn_app_with_clock().await;
    let mock = MockProvider::start().await;
    enable(&app, &mock, "github", true).await;
    enable(&app, &mock, "oidc", true).await;

    // Used up by its first callback, whatever the outcome.
    let callback = to_callback(&app, "github").await;
    assert_eq!(outcome(&get(&app, &callback).await).0, "token");
    let replayed = TestApp::answer(get(&app, &callback).await).await;
    assert_eq!(replayed.status, StatusCode::BAD_REQUEST);
    assert_eq!(replayed.code(), "INVALID_TOKEN");
    assert!(replayed.headers.get("location").is_none());

    // Forged or missing.
    for query in ["code=x&state=forged-state-value", "code=x", "code=x&state="] {
        let url = format!("{}/api/auth/oauth/github/callback?{query}", app.address);
        let forged = TestApp::answer(get(&app, &url).await).await;
        assert_eq!(forged.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(forged.code(), "INVALID_TOKEN");
    }

    // Another provider's state.
    let github = to_callback(&app, "github").await;
    let crossed = TestApp::answer(get(&app, &github.replace("/github/", "/oidc/")).await).await;
    assert_eq!(crossed.code(), "INVALID_TOKEN");
    let unknown = TestApp::answer(get(&app, &github.replace("/github/", "/facebook/")).await).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // Expired after ten minutes.
    let late = to_callback(&app, "oidc").await;
    app.advance(chrono::Duration::minutes(11));
    let expired = TestApp::answer(get(&app, &late).await).await;
    assert_eq!(expired.code(), "INVALID_TOKEN");

    // A refusal at the provider still comes back to the page.
    let started = start(&app, "github", BACK).await;
    let state = Url::parse(&location(&started))
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let denied = format!(
        "{}/api/auth/oauth/github/callback?error=access_denied&state={state}",
        app.address
    );
    assert_eq!(
        outcome(&get(&app, &denied).await),
        ("error".into(), "OAUTH_FAILED".into())
    );
    // Used up by that refusal too.
    let again = TestApp::answer(get(&app, &denied).await).await;
    assert_eq!(again.code(), "INVALID_TOKEN");
}

#[tokio::test]
async fn id_tokens_are_checked_and_rotated_keys_are_fetched() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    enable(&app, &mock, "oidc", true).await;
    for fault in [
        IdTokenFault::WrongNonce,
        IdTokenFault::Expired,
        IdTokenFault::BadSignature,
        IdTokenFault::WrongAudience,
        IdTokenFault::WrongIssuer,
    ] {
        mock.set_fault(fault);
        assert_eq!(refusal(&app, "oidc").await, "OAUTH_FAILED", "{fault:?}");
    }
    let refused = audit_actions(&app, "auth.login_failed").await;
    assert_eq!(refused.len(), 5);
    assert!(refused.iter().all(|e| e["details"]["reason"] == "id_token"));

    mock.set_fault(IdTokenFault::None);
    token_of(&app, "oidc").await;
    // The issuer signs with a new key: its keys are fetched again.
    mock.rotate_key();
    token_of(&app, "oidc").await;
}

#[tokio::test]
async fn redirect_to_is_checked_before_anything_leaves() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    enable(&app, &mock, "github", true).await;
    configure(
        &app,
        json!({ "auth.redirect_allow_list": ["https://app.example:8443"] }),
    )
    .await;
    for bad in [
        "https://evil.example/",
        "//evil.example/",
        "https://tessera.test@evil.example/",
        "http://tessera.test.evil.example/",
        "javascript:alert(document.domain)",
        "https://app.example/",
        "https://app.example:8443\\@evil.example/",
        "/admin/auth/sign-in",
    ] {
        let refused = TestApp::answer(start(&app, "github", bad).await).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(refused.code(), "INVALID_PAYLOAD");
        assert_eq!(refused.body["errors"][0]["field"], "redirect_to");
        assert!(refused.headers.get("location").is_none());
    }
    let missing =
        TestApp::answer(get(&app, &format!("{}/api/auth/oauth/github", app.address)).await).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.body["errors"][0]["field"], "redirect_to");

    configure(
        &app,
        json!({ "auth.email_links_base_url": "https://links.example/auth" }),
    )
    .await;
    let links = start(&app, "github", "https://links.example/signed-in").await;
    assert_eq!(links.status(), StatusCode::FOUND, "the email links' origin");
    let allowed = start(&app, "github", "https://app.example:8443/done").await;
    assert_eq!(allowed.status(), StatusCode::FOUND);
    assert!(location(&allowed).starts_with(&format!("{}/authorize?", mock.url)));
    assert_eq!(allowed.headers()["cache-control"], "no-store");
}

#[tokio::test]
async fn unknown_and_disabled_providers_are_not_found() {
    let app = spawn_app().await;
    for path in [
        "/api/auth/oauth/facebook?redirect_to=http://tessera.test/",
        "/api/auth/oauth/google?redirect_to=http://tessera.test/",
        "/api/auth/oauth/facebook/callback?code=x&state=y",
    ] {
        let answer = TestApp::answer(get(&app, &format!("{}{path}", app.address)).await).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.code(), "NOT_FOUND");
    }
    let listed = providers(&app).await;
    assert_eq!(listed["data"], json!([]));
}

#[tokio::test]
async fn an_account_with_totp_ends_a_provider_sign_in_at_the_challenge() {
    let app = testkit::spawn_app_with_clock().await;
    let mock = MockProvider::start().await;
    let admin = app.admin_session().await;
    let (_, secret, _) = crate::mfa::enrolled(&app, &admin, "second@example.com").await;
    enable(&app, &mock, "oidc", false).await;
    mock.set_user(person("3001", "second@example.com", true));
    let (key, challenge) = sign_in(&app, "oidc").await;
    assert_eq!(key, "mfa", "no session before the second factor");
    // The identity is linked; no session was made.
    assert_eq!(audit_actions(&app, "auth.identity_link").await.len(), 1);
    app.advance(chrono::Duration::seconds(30));
    let response = app
        .client
        .post(format!("{}/api/auth/mfa/verify", app.address))
        .json(&json!({ "challenge": challenge, "code": crate::mfa::code(&app, &secret, 0) }))
        .send()
        .await
        .unwrap();
    let done = TestApp::answer(response).await;
    assert_eq!(done.status, StatusCode::OK, "{:?}", done.body);
    assert_eq!(done.data()["user"]["email"], "second@example.com");
}

/// A passkey-only administrator signing in with a provider while
/// `auth.mfa_required_for_admins` is on is held at a challenge, which the
/// passkey finishes (API.md 17).
#[tokio::test]
async fn a_provider_sign_in_of_a_passkey_only_administrator_finishes_with_the_passkey() {
    use crate::factor_rules::{passkey_admin, passkey_options, verify_with};
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    let (_, admin, _, mut passkey) = passkey_admin(&app, "keeper@example.com").await;
    enable(&app, &mock, "oidc", false).await;
    mock.set_user(person("4001", "keeper@example.com", true));
    // Control: while the rule is off, the provider alone signs in.
    token_of(&app, "oidc").await;

    configure(&app, json!({ "auth.mfa_required_for_admins": true })).await;
    let (key, challenge) = sign_in(&app, "oidc").await;
    assert_eq!(key, "mfa", "no session before the passkey");
    let options = passkey_options(&app, &challenge).await;
    let credential = passkey.assert(&options, crate::passkeys::ORIGIN);
    let signed_in = verify_with(&app, &challenge, &credential).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    assert_eq!(signed_in.data()["user"]["email"], "keeper@example.com");
    let session = signed_in.data()["token"].as_str().unwrap();
    assert_eq!(
        app.get("/admin/api/users", session).await.status,
        StatusCode::OK
    );
    // Read with the ADMIN token: the first administrator's password session
    // is held at enrollment now.
    let logins = app
        .get("/admin/api/audit?action=auth.login&limit=50", &admin)
        .await;
    assert!(
        logins
            .data()
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["details"]["method"] == "provider" && e["details"]["mfa"] == "passkey"),
        "{:?}",
        logins.body
    );
}

#[tokio::test]
async fn userinfo_names_new_people_and_trust_email_stands_in_for_a_silent_provider() {
    let app = spawn_app().await;
    let mock = MockProvider::start().await;
    enable(&app, &mock, "oidc", true).await;
    // The email and the name in userinfo only: the new person keeps both.
    mock.set_claims(ClaimsShape {
        email_in_id_token: false,
        name_in_id_token: false,
        email_verified_said: true,
    });
    mock.set_user(person("2001", "info@example.com", true));
    let token = token_of(&app, "oidc").await;
    let me = app.get("/api/auth/me", &token).await;
    assert_eq!(me.data()["email"], "info@example.com");
    assert_eq!(me.data()["name"], "Pat Person", "{:?}", me.body);

    // A provider that never says whether the email is verified (Microsoft
    // Entra ID): refused until the administrator trusts it.
    mock.set_claims(ClaimsShape {
        email_in_id_token: true,
        name_in_id_token: true,
        email_verified_said: false,
    });
    mock.set_user(person("2002", "entra@example.com", true));
    assert_eq!(refusal(&app, "oidc").await, "OAUTH_FAILED");
    let mut trusted = mock.settings("oidc");
    trusted["trustEmail"] = json!(true);
    configure(&app, json!({ "auth.oauth": { "oidc": trusted } })).await;
    let changed = audit_actions(&app, "settings.update").await;
    assert!(
        changed
            .iter()
            .any(|e| e["details"]["trustEmail"]["oidc"] == true),
        "{changed:?}"
    );
    let token = token_of(&app, "oidc").await;
    let me = app.get("/api/auth/me", &token).await;
    assert_eq!(me.data()["email"], "entra@example.com");
    assert_eq!(me.data()["emailVerified"], true);
    // An explicit "not verified" is refused all the same.
    mock.set_claims(ClaimsShape::default());
    mock.set_user(person("2003", "unverified@example.com", false));
    assert_eq!(refusal(&app, "oidc").await, "OAUTH_FAILED");
    // The setting reads back, and takes booleans only.
    let admin = app.admin_session().await;
    let settings = app.get("/admin/api/settings", &admin).await;
    assert_eq!(settings.data()["auth.oauth"]["oidc"]["trustEmail"], true);
    assert_eq!(settings.data()["auth.oauth"]["github"]["trustEmail"], false);
    let mut wrong = mock.settings("oidc");
    wrong["trustEmail"] = json!("yes");
    let refused = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.oauth": { "oidc": wrong } } }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.body["errors"][0]["field"],
        "auth.oauth.oidc.trustEmail"
    );
}
