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
