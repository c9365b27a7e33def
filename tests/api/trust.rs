//! The security rules of API.md section 16, each tried as an attacker
//! would, each with a control that passes first: revoked credentials on
//! realtime, self-made administrators, write answers past the read grants,
//! pre-registered accounts, floods of the account routes, slow filters and
//! one user taking every realtime slot.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{Lcg, create_role, expose, grant, member};
use crate::realtime::{Stream, insert, notes};

async fn settings(app: &TestApp, admin: &str, values: Value) {
    let set = app
        .patch("/admin/api/settings", admin, json!({ "data": values }))
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
}

async fn user_id(app: &TestApp, bearer: &str) -> String {
    let me = app.get("/api/auth/me", bearer).await;
    assert_eq!(me.status, StatusCode::OK, "{:?}", me.body);
    me.data()["id"].as_str().unwrap().to_owned()
}

/// Opens a stream of `app.notes` with `access_token`; answers the refusal's
/// status and code, or `None` when the stream opened.
async fn realtime_refusal(address: &str, credential: &str) -> Option<(StatusCode, String)> {
    match Stream::open(
        address,
        &format!("subscribe=app.notes&access_token={credential}"),
        None,
        None,
    )
    .await
    {
        Ok(_) => None,
        Err((status, body)) => Some((status, body["errors"][0]["code"].to_string())),
    }
}

#[tokio::test]
async fn realtime_refuses_a_credential_revoked_after_a_remembered_read() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let role = create_role(&app, &admin, "Readers").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;

    // Each way a credential stops: used on a read first (so this instance
    // remembers the caller), the stream opening before the change.
    let (_, session) = member(&app, &admin, "reader@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    let (_, leaver) = member(&app, &admin, "leaver@example.com", &role).await;
    let (gone, gone_session) = member(&app, &admin, "gone@example.com", &role).await;
    for credential in [&session, &token, &leaver, &gone_session] {
        assert_eq!(
            app.get("/api/data/app/notes", credential).await.status,
            StatusCode::OK
        );
        assert_eq!(realtime_refusal(&app.address, credential).await, None);
    }

    // A logged-out session.
    let logout = app
        .call(
            reqwest::Method::POST,
            "/api/auth/logout",
            Some(&session),
            None,
        )
        .await;
    assert_eq!(logout.status, StatusCode::NO_CONTENT);
    // A revoked token (revoked before the logout ended its session anyway:
    // a new one, remembered the same way).
    let session2 = app.login("reader@example.com", "member-password-1").await;
    let token2 = app.create_token(&session2, "API").await;
    assert_eq!(
        app.get("/api/data/app/notes", &token2).await.status,
        StatusCode::OK
    );
    let tokens = app.get("/api/auth/tokens", &session2).await;
    for t in tokens.data().as_array().unwrap() {
        let revoke = app
            .delete(
                &format!("/api/auth/tokens/{}", t["id"].as_str().unwrap()),
                &session2,
            )
            .await;
        assert!(revoke.status.is_success(), "{:?}", revoke.body);
    }
    // A removed membership (the user keeps the Users role: API access, no grant).
    let leaver_id = user_id(&app, &leaver).await;
    let moved = app
        .patch(
            &format!("/admin/api/users/{leaver_id}"),
            &admin,
            json!({ "data": { "roleIds": [crate::USERS_ROLE] } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{:?}", moved.body);
    // A deactivated account.
    let off = app
        .patch(
            &format!("/admin/api/users/{gone}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(off.status, StatusCode::OK, "{:?}", off.body);

    for credential in [&session, &token, &token2, &leaver, &gone_session] {
        let list = app.get("/api/data/app/notes", credential).await;
        let refused = realtime_refusal(&app.address, credential).await;
        assert_eq!(
            refused,
            Some((list.status, format!("\"{}\"", list.code()))),
            "realtime answers what the list route answers"
        );
        assert!(
            matches!(
                list.status,
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ),
            "{:?}",
            list.body
        );
    }
    // Nor does the dashboards list serve a remembered caller.
    let dashboards = app.get("/api/dashboards", &token).await;
    assert_eq!(dashboards.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_stream_ends_when_its_session_expires() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    // Sessions of 2 seconds from now on.
    settings(
        &app,
        &admin,
        json!({ "auth.session_ttl_hours": 2.0 / 3600.0 }),
    )
    .await;
    let short = app
        .login(testkit::ADMIN_EMAIL, testkit::ADMIN_PASSWORD)
        .await;
    let mut stream = Stream::open(&app.address, "subscribe=app.notes", Some(&short), None)
        .await
        .unwrap();
    let started = Instant::now();
    assert!(
        !stream.ends_within(Duration::from_millis(1000)).await,
        "live while the session is"
    );
    assert!(stream.ends_within(Duration::from_millis(2500)).await);
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_millis(1500) && lasted < Duration::from_millis(3300),
        "{lasted:?}"
    );
}

#[tokio::test]
async fn one_user_holds_at_most_its_share_of_streams_on_all_instances() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    settings(
        &app,
        &admin,
        json!({ "realtime.max_subscribers_per_user": 2 }),
    )
    .await;
    let peer = app.spawn_peer().await;
    app.create_user(
        &admin,
        "other@example.com",
        "member-password-1",
        Some(vec![crate::ADMINS_ROLE.to_owned()]),
    )
    .await;
    let other_session = app.login("other@example.com", "member-password-1").await;

    let first = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    let _second = Stream::open(&peer, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    for address in [&app.address, &peer] {
        let (status, body) = Stream::open(address, "subscribe=app.notes", Some(&admin), None)
            .await
            .err()
            .expect("a third stream is refused");
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body:?}");
        assert_eq!(body["errors"][0]["code"], "RATE_LIMIT_EXCEEDED");
    }
    let refused = reqwest::Client::new()
        .get(format!("{}/api/realtime?subscribe=app.notes", app.address))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert!(refused.headers().contains_key("retry-after"));
    // Another user is not held back.
    assert!(
        Stream::open(&peer, "subscribe=app.notes", Some(&other_session), None)
            .await
            .is_ok()
    );
    // A closed stream gives its slot back (the server learns of the close
    // when it next writes to it: here an event).
    drop(first);
    let owner = user_id(&app, &admin).await;
    let mut reopened = None;
    for _ in 0..40 {
        insert(&app, &admin, &owner, "wakes the streams").await;
        if let Ok(stream) =
            Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None).await
        {
            reopened = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reopened.is_some(), "the slot came back");
}

/// The id of `svc.<table>`'s resource, exposed for every method.
async fn service_resource(app: &TestApp, admin: &str, table: &str) -> String {
    let resources = app.get("/admin/api/resources", admin).await;
    let id = resources
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["schema"] == "svc" && r["table"] == table)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    expose(app, admin, &id, &["GET", "POST", "PATCH", "DELETE"]).await;
    id
}

#[tokio::test]
async fn only_administrators_grant_administrator_power_through_the_data_api() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let roles = service_resource(&app, &admin, "roles").await;
    let members = service_resource(&app, &admin, "role_members").await;
    let users = service_resource(&app, &admin, "users").await;
    let leads = create_role(&app, &admin, "Team leads").await;
    let plain = create_role(&app, &admin, "Plain").await;
    for (resource, actions) in [
        (&roles, &["read", "update", "create"][..]),
        (&members, &["read", "create", "update", "delete"][..]),
        (&users, &["read", "update"][..]),
    ] {
        for action in actions {
            grant(
                &app,
                &admin,
                &leads,
                resource,
                action,
                Value::Null,
                Value::Null,
            )
            .await;
        }
    }
    let (lead, session) = member(&app, &admin, "lead@example.com", &leads).await;
    let admin_id = user_id(&app, &admin).await;

    // Controls: what the grants are for works.
    let described = app
        .patch(
            &format!("/api/data/svc/roles/{leads}"),
            &session,
            json!({ "data": { "description": "Leads of the teams" } }),
        )
        .await;
    assert_eq!(described.status, StatusCode::OK, "{:?}", described.body);
    let joined = app
        .post(
            "/api/data/svc/role_members",
            &session,
            json!({ "data": { "user_id": lead, "role_id": plain } }),
        )
        .await;
    assert_eq!(joined.status, StatusCode::CREATED, "{:?}", joined.body);
    let renamed = app
        .patch(
            &format!("/api/data/svc/users/{lead}"),
            &session,
            json!({ "data": { "name": "Lead" } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);

    // The escalations.
    for column in ["admin_access", "built_in"] {
        for value in [json!(true), json!(false)] {
            let own = app
                .patch(
                    &format!("/api/data/svc/roles/{leads}"),
                    &session,
                    json!({ "data": { column: value } }),
                )
                .await;
            assert_eq!(
                (
                    own.status,
                    own.code(),
                    own.body["errors"][0]["field"].clone()
                ),
                (StatusCode::BAD_REQUEST, "INVALID_PAYLOAD", json!(column)),
                "{:?}",
                own.body
            );
        }
        let made = app
            .post(
                "/api/data/svc/roles",
                &session,
                json!({ "data": { "id": kernel::new_id(), "name": "Sneaky", column: true } }),
            )
            .await;
        assert_eq!(made.status, StatusCode::BAD_REQUEST, "{:?}", made.body);
    }
    let into_admins = app
        .post(
            "/api/data/svc/role_members",
            &session,
            json!({ "data": { "user_id": lead, "role_id": crate::ADMINS_ROLE } }),
        )
        .await;
    assert_eq!(
        (into_admins.status, into_admins.code()),
        (StatusCode::FORBIDDEN, "PERMISSION_DENIED"),
        "{:?}",
        into_admins.body
    );
    let moved = app
        .patch(
            &format!("/api/data/svc/role_members/{lead},{plain}"),
            &session,
            json!({ "data": { "role_id": crate::ADMINS_ROLE } }),
        )
        .await;
    assert_eq!(moved.status, StatusCode::FORBIDDEN, "{:?}", moved.body);
    // An administrator's account is out of reach (its email would take it over).
    let hijack = app
        .patch(
            &format!("/api/data/svc/users/{admin_id}"),
            &session,
            json!({ "data": { "email": "lead+admin@example.com" } }),
        )
        .await;
    assert_eq!(hijack.status, StatusCode::FORBIDDEN, "{:?}", hijack.body);
    // Nothing changed: still no administrator.
    assert_eq!(
        app.get("/admin/api/users", &session).await.status,
        StatusCode::FORBIDDEN
    );
    let power = app
        .db
        .sql(&format!(
            "SELECT string_agg(r.name, ',' ORDER BY r.name) FROM svc.roles r WHERE r.admin_access \
             OR r.built_in OR r.id IN (SELECT role_id FROM svc.role_members WHERE user_id = '{lead}')"
        ))
        .await;
    assert_eq!(
        power.as_deref(),
        Some("Administrators,Plain,Team leads,Users")
    );
    let admin_email = app
        .db
        .sql(&format!(
            "SELECT email FROM svc.users WHERE id = '{admin_id}'"
        ))
        .await;
    assert_eq!(admin_email.as_deref(), Some(testkit::ADMIN_EMAIL));

    // Email templates decide where reset links go: administrators' alone.
    let templates = service_resource(&app, &admin, "email_templates").await;
    grant(
        &app,
        &admin,
        &leads,
        &templates,
        "update",
        Value::Null,
        Value::Null,
    )
    .await;
    let rerouted = app
        .patch(
            "/api/data/svc/email_templates/reset",
            &session,
            json!({ "data": { "body_html": "<img src=\"https://elsewhere.example/?{{link}}\">" } }),
        )
        .await;
    assert_eq!(
        rerouted.status,
        StatusCode::FORBIDDEN,
        "{:?}",
        rerouted.body
    );
    let by_admin_template = app
        .patch(
            "/api/data/svc/email_templates/reset",
            &admin,
            json!({ "data": { "subject": "Reset your password" } }),
        )
        .await;
    assert_eq!(
        by_admin_template.status,
        StatusCode::OK,
        "{:?}",
        by_admin_template.body
    );

    // An administrator still may.
    let by_admin = app
        .post(
            "/api/data/svc/role_members",
            &admin,
            json!({ "data": { "user_id": lead, "role_id": crate::ADMINS_ROLE } }),
        )
        .await;
    assert_eq!(by_admin.status, StatusCode::CREATED, "{:?}", by_admin.body);
}

#[tokio::test]
async fn no_grants_a_non_administrator_holds_let_them_write_administrator_power() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let roles = service_resource(&app, &admin, "roles").await;
    let members = service_resource(&app, &admin, "role_members").await;
    let users = service_resource(&app, &admin, "users").await;
    let admin_id = user_id(&app, &admin).await;
    let seed: u64 = std::env::var("TESSERA_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Lcg(seed);
    let filters = [
        Value::Null,
        json!({ "id": { "eq": "$USER.id" } }),
        json!({ "user_id": { "eq": "$USER.id" } }),
        json!({ "name": { "neq": "x" } }),
    ];
    let columns = [
        Value::Null,
        json!(["admin_access"]),
        json!(["built_in", "admin_access", "name", "id"]),
        json!(["user_id", "role_id"]),
        json!(["email", "name"]),
    ];
    for case in 0..8 {
        let role = create_role(&app, &admin, &format!("Case {case}")).await;
        let holds: Vec<(&String, &str)> = (0..4)
            .map(|_| {
                (
                    *rng.pick(&[&roles, &members, &users]),
                    *rng.pick(&["create", "update", "read", "delete"]),
                )
            })
            .collect();
        for (resource, action) in &holds {
            // A grant the catalog refuses (a column the table lacks) is no grant.
            let mut data = json!({ "roleId": role, "resourceId": resource, "action": action });
            let filter = rng.pick(&filters).clone();
            let cols = rng.pick(&columns).clone();
            if !filter.is_null() {
                data["filter"] = filter;
            }
            if !cols.is_null() {
                data["columns"] = cols;
            }
            app.post("/admin/api/grants", &admin, json!({ "data": data }))
                .await;
        }
        let (me, session) = member(&app, &admin, &format!("case{case}@example.com"), &role).await;
        let attempts = [
            (
                "PATCH",
                format!("/api/data/svc/roles/{role}"),
                json!({ "admin_access": true }),
            ),
            (
                "PATCH",
                format!("/api/data/svc/roles/{role}"),
                json!({ "built_in": true, "admin_access": true }),
            ),
            (
                "POST",
                "/api/data/svc/roles".to_owned(),
                json!({ "id": kernel::new_id(), "name": format!("R{case}"), "admin_access": true }),
            ),
            (
                "POST",
                "/api/data/svc/role_members".to_owned(),
                json!({ "user_id": me, "role_id": crate::ADMINS_ROLE }),
            ),
            (
                "POST",
                "/api/data/svc/role_members".to_owned(),
                json!([{ "user_id": me, "role_id": role }, { "user_id": me, "role_id": crate::ADMINS_ROLE }]),
            ),
            (
                "PATCH",
                format!("/api/data/svc/role_members/{me},{role}"),
                json!({ "role_id": crate::ADMINS_ROLE }),
            ),
            (
                "PATCH",
                format!("/api/data/svc/roles/{}", crate::USERS_ROLE),
                json!({ "admin_access": true }),
            ),
            (
                "PATCH",
                format!("/api/data/svc/users/{admin_id}"),
                json!({ "email": format!("taken{case}@example.com") }),
            ),
        ];
        for _ in 0..6 {
            let (method, path, body) = rng.pick(&attempts).clone();
            let method: reqwest::Method = method.parse().unwrap();
            let answer = app
                .call(method, &path, Some(&session), Some(json!({ "data": body })))
                .await;
            assert!(
                answer.status.is_client_error(),
                "case {case} (seed {seed}) holding {holds:?}: {path} {body} answered {:?}",
                answer.body
            );
        }
        assert_eq!(
            app.get("/admin/api/users", &session).await.status,
            StatusCode::FORBIDDEN,
            "case {case} (seed {seed}) made an administrator"
        );
    }
    let admin_roles = app
        .db
        .sql("SELECT count(*)::text FROM svc.roles WHERE admin_access")
        .await;
    assert_eq!(admin_roles.as_deref(), Some("1"));
    let admin_members = app
        .db
        .sql("SELECT string_agg(u.email, ',') FROM svc.role_members m JOIN svc.users u ON u.id = m.user_id JOIN svc.roles r ON r.id = m.role_id WHERE r.admin_access")
        .await;
    assert_eq!(admin_members.as_deref(), Some(testkit::ADMIN_EMAIL));
}

#[tokio::test]
async fn a_write_answers_with_what_the_read_grants_show() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let writers = create_role(&app, &admin, "Writers").await;
    grant(
        &app,
        &admin,
        &writers,
        &resource,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    grant(
        &app,
        &admin,
        &writers,
        &resource,
        "update",
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, blind) = member(&app, &admin, "blind@example.com", &writers).await;
    let partial = create_role(&app, &admin, "Partial").await;
    grant(
        &app,
        &admin,
        &partial,
        &resource,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    grant(
        &app,
        &admin,
        &partial,
        &resource,
        "read",
        json!({ "owner_id": { "eq": "$USER.id" } }),
        json!(["id", "owner_id", "title"]),
    )
    .await;
    let (partial_id, partial_session) = member(&app, &admin, "partial@example.com", &partial).await;
    let row = json!({ "owner_id": partial_id, "title": "mine", "secret": "hidden" });

    // Control: an administrator sees every column of what it wrote.
    let full = app
        .post("/api/data/app/notes", &admin, json!({ "data": row }))
        .await;
    assert_eq!(full.data()["secret"], "hidden", "{:?}", full.body);

    // No read grant: the key alone.
    let created = app
        .post("/api/data/app/notes", &blind, json!({ "data": row }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let id = created.data()["id"].as_i64().unwrap();
    assert_eq!(created.data(), &json!({ "id": id }));
    let changed = app
        .patch(
            &format!("/api/data/app/notes/{id}"),
            &blind,
            json!({ "data": { "title": "changed" } }),
        )
        .await;
    assert_eq!(changed.data(), &json!({ "id": id }), "{:?}", changed.body);

    // Read columns only, and the key alone where the read filter does not reach.
    let own = app
        .post(
            "/api/data/app/notes",
            &partial_session,
            json!({ "data": row }),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{:?}", own.body);
    let own_id = own.data()["id"].as_i64().unwrap();
    assert_eq!(
        own.data(),
        &json!({ "id": own_id, "owner_id": partial_id, "title": "mine" })
    );
    let someone_else = kernel::new_id().to_string();
    let theirs = app
        .post(
            "/api/data/app/notes",
            &partial_session,
            json!({ "data": [
                { "owner_id": someone_else, "title": "theirs", "secret": "x" },
                { "owner_id": partial_id, "title": "also mine", "secret": "y" }
            ] }),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{:?}", theirs.body);
    let rows = theirs.data().as_array().unwrap();
    assert_eq!(rows[0].as_object().unwrap().len(), 1, "{rows:?}");
    assert!(rows[0]["id"].is_i64());
    assert_eq!(rows[1]["title"], "also mine");
    assert!(rows[1].get("secret").is_none());
}

#[tokio::test]
async fn a_provider_sign_in_to_an_unverified_account_ends_what_its_registrant_set() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let mock = testkit::MockProvider::start().await;
    settings(
        &app,
        &admin,
        json!({ "auth.registration_enabled": true, "auth.oauth": { "oidc": mock.settings("oidc") } }),
    )
    .await;
    // The attacker registers the victim's address first.
    let registered = app
        .call(
            reqwest::Method::POST,
            "/api/auth/register",
            None,
            Some(json!({ "email": "victim@example.com", "password": "attacker-pass-1" })),
        )
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    let attacker = app.login("victim@example.com", "attacker-pass-1").await;
    assert_eq!(
        app.get("/api/dashboards", &attacker).await.status,
        StatusCode::OK
    );
    // No token and no passkey for an unproven address (API.md 17).
    let token = app
        .post(
            "/api/auth/tokens",
            &attacker,
            json!({ "name": "keep", "lifetimeDays": 30, "plane": "API" }),
        )
        .await;
    assert_eq!(token.code(), "EMAIL_NOT_VERIFIED");
    let passkey = app
        .post("/api/auth/passkeys/register/start", &attacker, json!({}))
        .await;
    assert_eq!(passkey.code(), "EMAIL_NOT_VERIFIED");

    // The owner signs in with the provider, which vouches for the address.
    mock.set_user(testkit::MockUser {
        subject: "victim-1".into(),
        email: "victim@example.com".into(),
        email_verified: true,
        name: "Victim".into(),
    });
    let started = app
        .client
        .get(format!(
            "{}/api/auth/oauth/oidc?redirect_to={}",
            app.address, "http://tessera.test/admin/auth/sign-in"
        ))
        .send()
        .await
        .unwrap();
    let authorize = started.headers()["location"].to_str().unwrap().to_owned();
    let authorized = app.client.get(authorize).send().await.unwrap();
    let callback = authorized.headers()["location"]
        .to_str()
        .unwrap()
        .replace("http://tessera.test", &app.address);
    let back = app.client.get(callback).send().await.unwrap();
    let to = back.headers()["location"].to_str().unwrap().to_owned();
    let owner = to.split_once("#token=").expect("signed in").1.to_owned();
    let me = app.get("/api/auth/me", &owner).await;
    assert_eq!(me.data()["email"], "victim@example.com");
    assert_eq!(me.data()["emailVerified"], true);

    // The registrant keeps no way in.
    let by_password = app
        .login_answer("victim@example.com", "attacker-pass-1")
        .await;
    assert_eq!(by_password.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        app.get("/api/auth/me", &attacker).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(me.data()["mfa"]["passkeys"], 0, "{:?}", me.body);
    let audit = app
        .get(
            "/admin/api/audit?action=auth.unverified_account_claimed",
            &admin,
        )
        .await;
    assert_eq!(
        audit.data().as_array().unwrap().len(),
        1,
        "{:?}",
        audit.body
    );
}

#[tokio::test]
async fn a_bogus_reset_is_refused_before_any_hashing() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    settings(&app, &admin, json!({ "auth.account_rate_limit_per_minute": 0, "auth.login_rate_limit_per_minute": 0, "auth.lockout_threshold": 1000 })).await;
    let median = |mut times: Vec<Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let mut resets = Vec::new();
    let mut sign_ins = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        let reset = app
            .call(
                reqwest::Method::POST,
                "/api/auth/password/reset",
                None,
                Some(json!({ "token": "not-a-token-at-all", "password": "a-new-password-1" })),
            )
            .await;
        resets.push(started.elapsed());
        assert_eq!(reset.code(), "INVALID_TOKEN");
        let started = Instant::now();
        let login = app
            .login_answer(testkit::ADMIN_EMAIL, "wrong-password-1")
            .await;
        sign_ins.push(started.elapsed());
        assert_eq!(login.status, StatusCode::UNAUTHORIZED);
        let accepted = app
            .call(
                reqwest::Method::POST,
                "/api/auth/invitations/accept",
                None,
                Some(json!({ "token": "not-a-token-at-all", "password": "a-new-password-1" })),
            )
            .await;
        assert_eq!(accepted.code(), "INVALID_TOKEN");
    }
    let (reset, sign_in) = (median(resets), median(sign_ins));
    assert!(
        reset * 3 < sign_in,
        "reset {reset:?} vs sign-in {sign_in:?}"
    );
}

#[tokio::test]
async fn account_routes_share_one_limit_per_address_on_every_instance() {
    let app = spawn_app().await;
    let peer = app.spawn_peer().await;
    let calls: [(&str, Value); 5] = [
        (
            "/api/auth/password/forgot",
            json!({ "email": "nobody@example.com" }),
        ),
        (
            "/api/auth/password/reset",
            json!({ "token": "x", "password": "a-new-password-1" }),
        ),
        ("/api/auth/email/verify", json!({ "token": "x" })),
        ("/api/auth/register", json!({ "email": "new@example.com" })),
        ("/api/auth/invitations/accept", json!("not an object")),
    ];
    for n in 0..30 {
        let (path, body) = &calls[n % calls.len()];
        let answer = app
            .call(reqwest::Method::POST, path, None, Some(body.clone()))
            .await;
        assert_ne!(
            answer.status,
            StatusCode::TOO_MANY_REQUESTS,
            "call {n} to {path}"
        );
    }
    let refused = app
        .client
        .post(format!("{peer}/api/auth/password/forgot"))
        .json(&json!({ "email": "nobody@example.com" }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "RATE_LIMIT_EXCEEDED");
    // Sign-in keeps its own window.
    assert_eq!(
        app.login_answer(testkit::ADMIN_EMAIL, testkit::ADMIN_PASSWORD)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn one_address_gets_a_bounded_number_of_account_emails_an_hour() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    settings(
        &app,
        &admin,
        json!({ "auth.emails_per_address_per_hour": 2 }),
    )
    .await;
    app.create_user(&admin, "flooded@example.com", "member-password-1", None)
        .await;
    for _ in 0..4 {
        let answer = app
            .call(
                reqwest::Method::POST,
                "/api/auth/password/forgot",
                None,
                Some(json!({ "email": "flooded@example.com" })),
            )
            .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT);
    }
    let count = || async {
        app.db
            .sql("SELECT count(*)::text FROM svc.email_outbox WHERE to_address = 'flooded@example.com' AND kind = 'reset'")
            .await
            .unwrap()
    };
    let mut dropped = Vec::new();
    for _ in 0..100 {
        dropped = app
            .get("/admin/api/audit?action=auth.email_dropped", &admin)
            .await
            .data()
            .as_array()
            .unwrap()
            .clone();
        if dropped.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert_eq!(count().await, "2");
}

#[tokio::test]
async fn a_slow_filter_times_out_while_others_are_answered() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let role = create_role(&app, &admin, "Readers").await;
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let (owner, reader) = member(&app, &admin, "reader@example.com", &role).await;
    app.db
        .sql(&format!(
            "INSERT INTO app.notes (owner_id, title, secret) \
             SELECT '{owner}', md5(i::text), md5((i * 7)::text) FROM generate_series(1, 1500000) i"
        ))
        .await;
    insert(&app, &admin, &owner, "findable").await;
    settings(&app, &admin, json!({ "data.statement_timeout_ms": 100 })).await;
    let slow = format!(
        "/api/data/app/notes?count=exact&limit=1&filter={}",
        crate::data::encode(
            &json!({ "or": [ { "title": { "ilike": "%zz%yy%xx%" } }, { "secret": { "ilike": "%qq%" } } ] })
                .to_string()
        )
    );
    let normal = "/api/data/app/notes?limit=1&sort=-id";
    let (timed_out, fast) = tokio::join!(app.get(&slow, &reader), async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let started = Instant::now();
        let answer = app.get(normal, &admin).await;
        (answer, started.elapsed())
    });
    assert_eq!(
        (timed_out.status, timed_out.code()),
        (StatusCode::BAD_REQUEST, "QUERY_TIMEOUT"),
        "{:?}",
        timed_out.body
    );
    assert_eq!(fast.0.status, StatusCode::OK, "{:?}", fast.0.body);
    assert!(fast.1 < Duration::from_millis(500), "{:?}", fast.1);
    // Administrators are held to it too, and the connections stay healthy.
    assert_eq!(app.get(&slow, &admin).await.code(), "QUERY_TIMEOUT");
    for _ in 0..10 {
        let again = app.get(normal, &reader).await;
        assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
        assert_eq!(again.data()[0]["title"], "findable");
    }
    assert_eq!(
        app.client
            .get(format!("{}/readyz", app.address))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    // An MCP tool runs the same statement under the same limit.
    crate::mcp::enable(&app, &admin).await;
    let mut mcp = crate::mcp::Client::new(&app, &reader);
    mcp.initialize().await;
    let slow_filter = json!({ "or": [ { "title": { "ilike": "%zz%yy%xx%" } }, { "secret": { "ilike": "%qq%" } } ] });
    let (failed, text) = mcp
        .call(
            "query_rows",
            json!({ "resource": "app.notes", "filter": slow_filter, "limit": 1 }),
        )
        .await;
    assert!(failed && text.starts_with("QUERY_TIMEOUT"), "{text}");
    // Raised again, the same read is answered.
    settings(&app, &admin, json!({ "data.statement_timeout_ms": 60000 })).await;
    let answered = app.get(&slow, &reader).await;
    assert_eq!(answered.status, StatusCode::OK, "{:?}", answered.body);
}
