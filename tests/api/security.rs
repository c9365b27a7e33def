//! Security properties checked over the whole surface: every route the
//! documents list as needing a credential answers 401 without one, the open
//! ones are the spec's open list, and every answer carries the security
//! headers without naming the server's software.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

/// Routes open without a credential (the spec's list: public authentication
/// routes, public webhooks, PUBLIC files, plus the health probes).
const OPEN: [&str; 5] = [
    "/api/auth/",
    "/api/workflows/",
    "/api/files/",
    "/healthz",
    "/readyz",
];

/// (method, path, open) of every operation of an OpenAPI document, path
/// parameters filled with a well-formed id.
fn operations(document: &Value) -> Vec<(Method, String, bool)> {
    let mut found = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        let filled: String = path
            .split('/')
            .map(|part| {
                if part.starts_with('{') {
                    "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
                } else {
                    part
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        for (method, operation) in item.as_object().unwrap() {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            // `security: []` or `[{}]` (or none, here or for the whole
            // document) marks a route that takes no credential.
            let open = operation
                .get("security")
                .or_else(|| document.get("security"))
                .and_then(Value::as_array)
                .is_none_or(|ways| {
                    ways.is_empty()
                        || ways
                            .iter()
                            .any(|w| w.as_object().is_some_and(|w| w.is_empty()))
                });
            found.push((method, filled.clone(), open));
        }
    }
    found
}

async fn without_credential(app: &TestApp, method: Method, path: &str) -> reqwest::Response {
    let mut request = app
        .client
        .request(method.clone(), format!("{}{path}", app.address));
    if method != Method::GET && method != Method::DELETE {
        request = request.json(&json!({ "data": {} }));
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn every_route_needing_a_credential_refuses_without_one() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    // Enabled, so the MCP endpoint answers for its credential rather than 404.
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "mcp.enabled": true } }),
    )
    .await;
    let admin_document = app.get("/admin/api/openapi", &admin).await.body;
    let data_document = app
        .get(
            &format!("/admin/api/openapi/data?role={}", crate::ADMINS_ROLE),
            &admin,
        )
        .await
        .body;
    let mut checked = 0;
    for document in [&admin_document, &data_document] {
        for (method, path, open) in operations(document) {
            if open {
                assert!(
                    OPEN.iter().any(|prefix| path.starts_with(prefix)),
                    "{method} {path} takes no credential but is not on the open list"
                );
                continue;
            }
            let response = without_credential(&app, method.clone(), &path).await;
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} without a credential"
            );
            let body: Value = response.json().await.unwrap();
            assert_eq!(
                body["errors"][0]["code"], "AUTHENTICATION_REQUIRED",
                "{method} {path}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "only {checked} routes checked");
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let answers = [
        (Method::GET, "/healthz", None),
        (Method::GET, "/api/auth/me", None),
        (Method::GET, "/api/auth/me", Some(admin.as_str())),
        (Method::GET, "/nowhere", None),
        (Method::PUT, "/api/auth/login", None),
        (Method::GET, "/admin/api/openapi", Some(admin.as_str())),
        (Method::GET, "/admin/auth/sign-in", None),
        (Method::GET, "/admin/", None),
    ];
    for (method, path, bearer) in answers {
        let mut request = app
            .client
            .request(method.clone(), format!("{}{path}", app.address));
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        let response = request.send().await.unwrap();
        let headers = response.headers();
        assert_eq!(
            headers["x-content-type-options"], "nosniff",
            "{method} {path}"
        );
        assert!(headers.contains_key("referrer-policy"), "{method} {path}");
        assert!(!headers.contains_key("server"), "{method} {path}");
        assert!(!headers.contains_key("x-powered-by"), "{method} {path}");
        let html = headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html");
        if html {
            assert!(
                headers["content-security-policy"]
                    .to_str()
                    .unwrap()
                    .contains("default-src"),
                "{method} {path}"
            );
        }
    }
}

/// One timed call: how long the answer took, its status and body.
async fn timed(request: reqwest::RequestBuilder) -> (std::time::Duration, (u16, String)) {
    let started = std::time::Instant::now();
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    (started.elapsed(), (status, body))
}

/// Calls `known` and `unknown` `tries` times each, interleaved (the order
/// alternating, so both see the same load); checks they answer the same and
/// that their median times are within 10% of each other. A round lost to
/// the noise of a shared machine is measured again, up to three rounds: a
/// real difference (a hash or a round trip only one side pays) loses all.
async fn alike(
    what: &str,
    tries: usize,
    known: impl Fn() -> reqwest::RequestBuilder,
    unknown: impl Fn() -> reqwest::RequestBuilder,
) {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let [known, unknown] = medians(what, tries, &known, &unknown).await;
        let (fast, slow) = (known.min(unknown), known.max(unknown));
        eprintln!("{what}: median known {known:?}, unknown {unknown:?} over {tries} tries each");
        if slow - fast <= slow / 10 {
            return;
        }
        rounds.push((known, unknown));
    }
    panic!("{what}: medians (known, unknown) more than 10% apart in every round: {rounds:?}");
}

/// One round of [`alike`]: the median time of each side.
async fn medians(
    what: &str,
    tries: usize,
    known: &impl Fn() -> reqwest::RequestBuilder,
    unknown: &impl Fn() -> reqwest::RequestBuilder,
) -> [std::time::Duration; 2] {
    let mut times = [Vec::with_capacity(tries), Vec::with_capacity(tries)];
    let mut answers = [
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    ];
    for i in 0..tries {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let request = if side == 0 { known() } else { unknown() };
            let (took, answer) = timed(request).await;
            times[side].push(took);
            answers[side].insert(answer);
            // Work a call leaves in the background (an email queued) ends
            // before the next call, whose own time is what is compared.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    assert_eq!(
        answers[0].len(),
        1,
        "{what}: known answers vary: {:?}",
        answers[0]
    );
    assert_eq!(
        answers[0], answers[1],
        "{what}: known and unknown answer differently"
    );
    times.map(|mut t| {
        t.sort_unstable();
        t[t.len() / 2]
    })
}

#[tokio::test]
async fn sign_in_forgot_resend_and_email_codes_tell_nothing_about_which_emails_exist() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let changed = app
        .patch(
            "/admin/api/settings",
            &admin,
            // The limits are tested on their own: here only uniformity counts.
            json!({ "data": { "auth.login_rate_limit_per_minute": 0,
                              "auth.account_rate_limit_per_minute": 0,
                              "auth.email_code_enabled": true } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{:?}", changed.body);
    app.create_user(&admin, "known@example.com", "right-password-1", None)
        .await;
    let post = |path: &'static str, body: Value| {
        let request = app
            .client
            .post(format!("{}{path}", app.address))
            .json(&body);
        move || request.try_clone().unwrap()
    };
    let wrong = |email: &str| json!({ "email": email, "password": "wrong-password-1" });
    alike(
        "sign-in",
        200,
        post("/api/auth/login", wrong("known@example.com")),
        post("/api/auth/login", wrong("nobody@example.com")),
    )
    .await;
    for path in [
        "/api/auth/password/forgot",
        "/api/auth/email/resend",
        "/api/auth/email-code",
    ] {
        alike(
            path,
            200,
            post(path, json!({ "email": "known@example.com" })),
            post(path, json!({ "email": "nobody@example.com" })),
        )
        .await;
    }
}

#[tokio::test]
async fn secrets_never_reach_the_log() {
    use crate::binary::serve_logged;
    let db = testkit::TestDatabase::create().await;
    let sink = testkit::SmtpSink::start().await;
    let smtp = sink.url();
    let (_server, base, log) = serve_logged(
        &db.url,
        &[
            ("TESSERA_SMTP_URL", smtp.as_str()),
            ("TESSERA_LOG", "debug"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let call = |method: Method, path: &str, bearer: Option<&str>, body: Value| {
        let mut request = client.request(method, format!("{base}{path}")).json(&body);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    };
    let mut secrets = vec!["boot-password-1".to_owned(), "wrong-password-9".to_owned()];
    let login = |email: &'static str, password: String| {
        call(
            Method::POST,
            "/api/auth/login",
            None,
            json!({ "email": email, "password": password }),
        )
    };
    let (status, _) = login("boot@example.com", "wrong-password-9".into()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, body) = login("boot@example.com", "boot-password-1".into()).await;
    let admin = body["data"]["token"].as_str().unwrap().to_owned();
    secrets.push(admin.clone());
    let oauth = json!({ "github": { "enabled": true, "clientId": "client-1", "clientSecret": "oauth-secret-71" } });
    let settings = json!({ "data": { "auth.registration_enabled": true, "auth.oauth": oauth } });
    let (status, body) = call(Method::PATCH, "/admin/api/settings", Some(&admin), settings).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    secrets.push("oauth-secret-71".into());

    let registered = json!({ "email": "reg@example.com", "password": "register-password-2" });
    let (status, body) = call(Method::POST, "/api/auth/register", None, registered).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    secrets.push("register-password-2".into());
    let (_, body) = login("reg@example.com", "register-password-2".into()).await;
    let session = body["data"]["token"].as_str().unwrap().to_owned();
    secrets.push(session.clone());
    let token = json!({ "name": "ci", "lifetimeDays": 1, "plane": "API" });
    // A token of the (verified) administrator: an unverified account makes none.
    let (status, body) = call(Method::POST, "/api/auth/tokens", Some(&admin), token).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    secrets.push(body["data"]["token"].as_str().unwrap().to_owned());
    let change =
        json!({ "currentPassword": "register-password-2", "newPassword": "changed-password-3" });
    let (status, body) = call(
        Method::POST,
        "/api/auth/password/change",
        Some(&session),
        change,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    secrets.push("changed-password-3".into());

    let forgot = json!({ "email": "reg@example.com" });
    call(Method::POST, "/api/auth/password/forgot", None, forgot).await;
    let reset = sink
        .wait_for(
            "reg@example.com",
            "reset-password",
            std::time::Duration::from_secs(20),
        )
        .await
        .token("reset-password")
        .unwrap();
    let body = json!({ "token": reset, "password": "reset-password-4" });
    let (status, _) = call(Method::POST, "/api/auth/password/reset", None, body).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    secrets.extend([reset, "reset-password-4".into()]);

    let invite = json!({ "data": { "email": "guest@example.com", "roleIds": [] } });
    let (status, body) = call(Method::POST, "/admin/api/invitations", Some(&admin), invite).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let invitation = sink
        .wait_for(
            "guest@example.com",
            "accept-invitation",
            std::time::Duration::from_secs(20),
        )
        .await
        .token("accept-invitation")
        .unwrap();
    let body = json!({ "token": invitation, "password": "invited-password-5" });
    let (status, _) = call(Method::POST, "/api/auth/invitations/accept", None, body).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    secrets.extend([invitation, "invited-password-5".into()]);

    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = log.lock().unwrap().clone();
    // The log is there to be searched: each request left its line.
    for route in [
        "/api/auth/login",
        "/api/auth/password/reset",
        "/api/auth/invitations/accept",
    ] {
        assert!(log.contains(route), "no line for {route} in the log");
    }
    for secret in &secrets {
        assert!(
            !log.contains(secret.as_str()),
            "the log holds a secret: {secret}"
        );
    }
    eprintln!(
        "searched {} bytes of debug log for {} secrets",
        log.len(),
        secrets.len()
    );
    db.destroy().await;
}
