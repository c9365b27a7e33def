//! Good input never fails because requests interleave (issue 22): workers
//! doing mixed administration and sign-ins at once, on two instances of one
//! database, each get what they would get alone.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

/// One request to `base` (this app or its peer).
async fn send(
    app: &TestApp,
    base: &str,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut request = app.client.request(method, format!("{base}{path}"));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    TestApp::answer(request.send().await.unwrap()).await
}

/// What one worker does, each step checked for the answer it gets alone.
async fn worker(app: &TestApp, base: &str, admin: &str, w: usize) -> Vec<String> {
    let post = |path: &'static str, body: Value| {
        send(
            app,
            base,
            Method::POST,
            path,
            Some(admin),
            Some(json!({ "data": body })),
        )
    };
    let mut done = Vec::new();
    let expect = |answer: &Answer, status: StatusCode, step: &str| {
        assert_eq!(
            answer.status, status,
            "worker {w} {step}: {:?}",
            answer.body
        );
    };
    let role = post(
        "/admin/api/roles",
        json!({ "name": format!("Team {w}"), "apiAccess": true }),
    )
    .await;
    expect(&role, StatusCode::CREATED, "role");
    let role_id = role.data()["id"].as_str().unwrap().to_owned();
    let email = format!("worker{w}@example.com");
    let user = post(
        "/admin/api/users",
        json!({ "email": email, "password": "password-123", "roleIds": [role_id], "emailVerified": true }),
    )
    .await;
    expect(&user, StatusCode::CREATED, "user");
    // Pairs of workers create the first tables of the same new schema.
    let table = send(
        app,
        base,
        Method::POST,
        &format!("/admin/api/schema/team{}/tables", w / 2),
        Some(admin),
        Some(json!({ "data": { "name": format!("t{w}"),
            "columns": [{ "name": "id", "dataType": "bigint", "primaryKey": true }] } })),
    )
    .await;
    expect(&table, StatusCode::CREATED, "table");
    let resource = table.data()["resourceId"].as_str().unwrap().to_owned();
    let grant = post(
        "/admin/api/grants",
        json!({ "roleId": role_id, "resourceId": resource, "action": "read" }),
    )
    .await;
    expect(&grant, StatusCode::CREATED, "grant");
    let login = send(
        app,
        base,
        Method::POST,
        "/api/auth/login",
        None,
        Some(json!({ "email": email, "password": "password-123" })),
    )
    .await;
    expect(&login, StatusCode::OK, "sign-in");
    let session = login.data()["token"].as_str().unwrap().to_owned();
    let token = send(
        app,
        base,
        Method::POST,
        "/api/auth/tokens",
        Some(&session),
        Some(json!({ "name": "ci", "lifetimeDays": 1, "plane": "API" })),
    )
    .await;
    expect(&token, StatusCode::CREATED, "token");
    let invitation = post(
        "/admin/api/invitations",
        json!({ "email": format!("invitee{w}@example.com"), "roleIds": [role_id] }),
    )
    .await;
    expect(&invitation, StatusCode::CREATED, "invitation");
    let settings = send(
        app,
        base,
        Method::PATCH,
        "/admin/api/settings",
        Some(admin),
        Some(json!({ "data": { "workflows.max_sync_wait_ms": 1000 + w } })),
    )
    .await;
    expect(&settings, StatusCode::OK, "settings");
    let read = send(
        app,
        base,
        Method::GET,
        &format!("/api/data/team{}/t{w}", w / 2),
        Some(&session),
        None,
    )
    .await;
    expect(&read, StatusCode::NOT_FOUND, "read of an unexposed table");
    done.push(role_id);
    done
}

#[tokio::test]
async fn mixed_administration_on_two_instances_answers_as_it_would_alone() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let peer = app.spawn_peer().await;
    let workers = (0..8).map(|w| {
        let base = if w % 2 == 0 {
            app.address.clone()
        } else {
            peer.clone()
        };
        let (app, admin) = (&app, admin.as_str());
        async move { worker(app, &base, admin, w).await }
    });
    let roles: Vec<String> = futures_util::future::join_all(workers)
        .await
        .into_iter()
        .flatten()
        .collect();

    // Every acknowledged change is there.
    let listed = app.get("/admin/api/roles", &admin).await;
    for role in &roles {
        assert!(
            listed
                .data()
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["id"] == role.as_str()),
            "role {role}"
        );
    }
    let users = app.get("/admin/api/users?search=worker", &admin).await;
    assert_eq!(users.body["meta"]["total"], 8);
    let grants = app.get("/admin/api/grants", &admin).await;
    assert_eq!(grants.data().as_array().unwrap().len(), 8);
    let tokens = app.get("/admin/api/tokens", &admin).await;
    assert_eq!(tokens.data().as_array().unwrap().len(), 8);
    let invitations = app.get("/admin/api/invitations", &admin).await;
    assert_eq!(invitations.data().as_array().unwrap().len(), 8);
    let settings = app.get("/admin/api/settings", &admin).await;
    let wait = settings.data()["workflows.max_sync_wait_ms"]
        .as_u64()
        .unwrap();
    assert!(
        (1000..1008).contains(&wait),
        "one of the values set: {wait}"
    );
    let tables = app
        .db
        .sql("SELECT count(*)::text FROM information_schema.tables WHERE table_schema LIKE 'team%'")
        .await;
    assert_eq!(tables.as_deref(), Some("8"));
}

#[tokio::test]
async fn simultaneous_changes_of_different_providers_are_all_kept() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let peer = app.spawn_peer().await;
    for round in 0..3 {
        let changes = ["google", "github", "oidc"]
            .into_iter()
            .enumerate()
            .map(|(i, provider)| {
                let base = if i % 2 == 0 {
                    app.address.clone()
                } else {
                    peer.clone()
                };
                let mut fields = json!({ "enabled": true, "clientId": format!("{provider}-{round}"),
                                     "clientSecret": format!("secret-{round}") });
                if provider == "oidc" {
                    fields["issuer"] = json!("https://id.example");
                }
                let (app, admin) = (&app, admin.as_str());
                async move {
                    send(
                        app,
                        &base,
                        Method::PATCH,
                        "/admin/api/settings",
                        Some(admin),
                        Some(json!({ "data": { "auth.oauth": { provider: fields } } })),
                    )
                    .await
                }
            });
        for answer in futures_util::future::join_all(changes).await {
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        }
        let settings = app.get("/admin/api/settings", &admin).await;
        for provider in ["google", "github", "oidc"] {
            assert_eq!(
                settings.data()["auth.oauth"][provider]["clientId"],
                format!("{provider}-{round}"),
                "round {round}"
            );
        }
    }
}

/// Every change of `users.active` and of memberships bumps the one row of
/// `svc.cache_version`, so such transactions commit one after the other and
/// the guard of the last administrator sees the change committed before.
#[tokio::test]
async fn two_administrators_deactivated_at_once_leave_one() {
    let app = spawn_app().await;
    let auth = &app.services.accounts;
    let admin_role = Some(vec![crate::ADMINS_ROLE.parse().unwrap()]);
    let new_admin = |n: usize| auth::CreateUser {
        email: format!("admin{n}@example.com"),
        password: Some("password-123".into()),
        role_ids: admin_role.clone(),
        ..auth::CreateUser::default()
    };
    let deactivate = || auth::ChangeUser {
        active: Some(false),
        ..auth::ChangeUser::default()
    };
    let first = app
        .db
        .sql("SELECT id::text FROM svc.users WHERE active")
        .await
        .unwrap();
    let mut remaining: uuid::Uuid = first.parse().unwrap();
    for round in 0..5 {
        let other = auth
            .create_user(audit::Actor::SYSTEM, new_admin(round), None)
            .await
            .unwrap()
            .id;
        let answers = futures_util::future::join(
            auth.update_user(None, remaining, deactivate(), None),
            auth.update_user(None, other, deactivate(), None),
        )
        .await;
        let refused = match answers {
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
            other => panic!("round {round}: one change must be refused: {other:?}"),
        };
        assert_eq!(kernel::ErrorCode::code(&refused).as_str(), "CONFLICT");
        let active = app
            .db
            .sql("SELECT string_agg(id::text, ',') FROM svc.users WHERE active")
            .await
            .unwrap();
        assert!(
            !active.contains(','),
            "round {round}: one administrator left"
        );
        remaining = active.parse().unwrap();
    }
}
