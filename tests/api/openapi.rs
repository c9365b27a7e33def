//! The OpenAPI document and the browsable docs.

use reqwest::{Method, StatusCode};
use testkit::spawn_app;

#[tokio::test]
async fn the_document_lists_every_route() {
    let app = spawn_app().await;
    let doc = app
        .call(Method::GET, "/admin/api/openapi", None, None)
        .await;
    assert_eq!(doc.status, StatusCode::OK);
    assert!(doc.body["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc.body["paths"].as_object().unwrap();
    for (path, method) in [
        ("/api/auth/login", "post"),
        ("/api/auth/logout", "post"),
        ("/api/auth/me", "get"),
        ("/api/auth/me", "patch"),
        ("/api/auth/sessions", "get"),
        ("/api/auth/sessions/{id}", "delete"),
        ("/api/auth/tokens", "post"),
        ("/api/auth/tokens/{id}", "delete"),
        ("/admin/api/users", "get"),
        ("/admin/api/users/{id}", "patch"),
        ("/admin/api/roles/{id}/members/{user_id}", "put"),
        ("/admin/api/tokens", "post"),
        ("/admin/api/settings", "patch"),
        ("/admin/api/audit", "get"),
        ("/healthz", "get"),
        ("/api/auth/register", "post"),
        ("/api/auth/password/forgot", "post"),
        ("/api/auth/password/reset", "post"),
        ("/api/auth/password/change", "post"),
        ("/api/auth/email/verify", "post"),
        ("/api/auth/email/resend", "post"),
        ("/api/auth/invitations/accept", "post"),
        ("/admin/api/invitations", "get"),
        ("/admin/api/invitations", "post"),
        ("/admin/api/invitations/{id}", "delete"),
        ("/admin/api/schema/{schema}/tables", "post"),
        ("/admin/api/schema/{schema}/tables", "get"),
        ("/admin/api/schema/{schema}/tables/preview", "post"),
        ("/admin/api/schema/{schema}/tables/{table}/columns", "post"),
        ("/admin/api/schema/{schema}/tables/{table}", "delete"),
        ("/admin/api/resources", "get"),
        ("/admin/api/resources", "post"),
        ("/admin/api/resources/{id}", "get"),
        ("/admin/api/resources/{id}", "patch"),
        ("/admin/api/grants", "get"),
        ("/admin/api/grants", "post"),
        ("/admin/api/grants/{id}", "delete"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    assert!(doc.body["components"]["securitySchemes"]["bearer"].is_object());
    let create = &paths["/admin/api/schema/{schema}/tables"]["post"];
    assert!(
        create["requestBody"].is_object() && create["responses"]["201"].is_object(),
        "bodies and answers are documented"
    );
}

#[tokio::test]
async fn the_docs_page_is_served_without_downloads() {
    let app = spawn_app().await;
    let redirect = app
        .client
        .get(format!("{}/admin/api/docs", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), StatusCode::PERMANENT_REDIRECT);
    let page = app
        .client
        .get(format!("{}/admin/api/docs/", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("swagger-ui"));
    let bundle = app
        .client
        .get(format!(
            "{}/admin/api/docs/swagger-ui-bundle.js",
            app.address
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bundle.status(), StatusCode::OK);
}
