//! The security rules of API.md section 21, each tried as an attacker
//! would, each with a control that passes first: snapshot steps whose runs
//! act as an administrator, a factor reset that ends sessions, a session
//! that proved a factor since replaced, a diff that runs too long, and
//! credentials in exported http steps and stored runs; and a table rename
//! reaching the running webhook on every instance (API.md 12).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app, spawn_app_with, spawn_app_with_clock};

use crate::ADMINS_ROLE;
use crate::data::{create_role, grant, keyed_table, member};
use crate::mfa::{challenge, code, delete_with, enrolled, verify};
use crate::snapshot::{apply, diff_of, exported_json};
use crate::workflows::{admin_id, history, published};

/// The step of `steps` that changes `name`.
fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {steps:?}"))
}

/// A snapshot workflow whose draft and published definitions are
/// `trigger` and `steps`.
fn workflow(slug: &str, trigger: Value, steps: Value) -> Value {
    let definition = json!({ "trigger": trigger, "steps": steps });
    json!({ "slug": slug, "name": slug, "enabled": true, "draft": definition, "published": definition })
}

/// `snapshot` with `svc.<table>` exposed for `methods`.
fn exposing(mut snapshot: Value, table: &str, methods: &[&str]) -> Value {
    let resource = snapshot["resources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["schema"] == "svc" && r["table"] == table)
        .expect("the service table is a resource");
    resource["exposedMethods"] = json!(methods);
    snapshot
}

/// Whether `session`'s account holds administrator power.
async fn is_admin(app: &TestApp, session: &str) -> bool {
    app.get("/admin/api/users", session).await.status == StatusCode::OK
}

#[tokio::test]
async fn a_snapshot_cannot_make_a_database_event_workflow_an_unmarked_administrator() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let notes = keyed_table(
        &app,
        &admin,
        "notes",
        json!([{ "name": "body", "dataType": "text" }]),
        &["GET", "POST"],
    )
    .await;
    let writers = create_role(&app, &admin, "Writers").await;
    grant(
        &app,
        &admin,
        &writers,
        &notes,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    let (attacker, session) = member(&app, &admin, "mallory@example.com", &writers).await;
    let base = exported_json(&app, &admin).await;
    let event = |execute_as: Option<&str>| {
        let mut trigger =
            json!({ "type": "dbEvent", "resource": "app.notes", "events": ["insert"] });
        if let Some(user) = execute_as {
            trigger["executeAs"] = json!(user);
        }
        trigger
    };
    let promote = json!([{ "id": "promote", "type": "insert", "resource": "svc.role_members",
        "data": { "user_id": "{{start.data.new.body}}", "role_id": ADMINS_ROLE } }]);
    let with = |trigger: Value, methods: &[&str]| {
        let mut snapshot = exposing(base.clone(), "role_members", methods);
        snapshot["workflows"].as_array_mut().unwrap().push(workflow(
            "promote",
            trigger,
            promote.clone(),
        ));
        snapshot
    };

    // Controls: a database-event workflow that acts as a person who is no
    // administrator, beside svc.role_members exposed for reading, is not
    // marked.
    let steps = diff_of(
        &app,
        &admin,
        &with(event(Some("mallory@example.com")), &["GET"]),
    )
    .await;
    assert!(
        steps.iter().all(|s| s.get("adminPower").is_none()),
        "{steps:?}"
    );
    // Without executeAs its runs act as the longest-standing administrator:
    // marked, with the reason; so is exposing svc.role_members for POST.
    let attack = with(event(None), &["GET", "POST"]);
    let steps = diff_of(&app, &admin, &attack).await;
    let marked = step(&steps, "promote");
    assert_eq!(marked["adminPower"], true, "{steps:?}");
    assert!(
        marked["adminPowerReason"]
            .as_str()
            .unwrap()
            .contains("longest-standing administrator"),
        "{marked:?}"
    );
    let exposure = steps
        .iter()
        .find(|s| s["name"] == "svc.role_members" && s["kind"] == "resource")
        .expect("the exposure step");
    assert_eq!(exposure["adminPower"], true, "{steps:?}");
    assert!(
        exposure["adminPowerReason"]
            .as_str()
            .unwrap()
            .contains("POST")
    );
    let exposed_only = exposing(base.clone(), "role_members", &["GET", "POST"]);
    let steps = diff_of(&app, &admin, &exposed_only).await;
    assert_eq!(step(&steps, "svc.role_members")["adminPower"], true);

    // The attack: applied without the flag, then the insert.
    let refused = apply(&app, &admin, json!({ "snapshot": attack })).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.code(), "INVALID_PAYLOAD");
    let exposed_at = base["resources"]
        .as_array()
        .unwrap()
        .iter()
        .position(|r| r["schema"] == "svc" && r["table"] == "role_members")
        .unwrap();
    let promote_at = attack["workflows"].as_array().unwrap().len() - 1;
    let field = refused.body["errors"][0]["field"].as_str().unwrap();
    assert!(
        [
            format!("resources[{exposed_at}].exposedMethods"),
            format!("workflows[{promote_at}].published.trigger"),
        ]
        .iter()
        .any(|f| f == field),
        "{field}"
    );
    let note = app
        .post(
            "/api/data/app/notes",
            &session,
            json!({ "data": { "body": attacker } }),
        )
        .await;
    assert_eq!(note.status, StatusCode::CREATED, "{:?}", note.body);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!is_admin(&app, &session).await, "no new administrator");
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM svc.workflows WHERE slug = 'promote'")
            .await
            .as_deref(),
        Some("0")
    );

    // The attack is real: an administrator who consents gets exactly it.
    let applied = apply(
        &app,
        &admin,
        json!({ "snapshot": attack, "allowAdminPower": true }),
    )
    .await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let note = app
        .post(
            "/api/data/app/notes",
            &session,
            json!({ "data": { "body": attacker } }),
        )
        .await;
    assert_eq!(note.status, StatusCode::CREATED, "{:?}", note.body);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !is_admin(&app, &session).await {
        assert!(Instant::now() < deadline, "the consented workflow ran");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_called_workflow_is_marked_only_when_an_administrators_workflow_reaches_it() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let me = admin_id(&app, &admin).await;
    let hook = json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" });
    let finish = json!([{ "id": "f", "type": "finish", "result": "ok" }]);
    published(&app, &admin, "child", hook.clone(), finish.clone()).await;
    published(&app, &admin, "other", hook.clone(), finish.clone()).await;
    let call = |slug: &str| json!([{ "id": "c", "type": "call", "workflow": slug }]);
    // Already on the target: a caller acting as the administrator, and one
    // acting as whoever calls it.
    published(
        &app,
        &admin,
        "admin-caller",
        json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "public", "executeAs": me }),
        call("child"),
    )
    .await;
    published(&app, &admin, "user-caller", hook.clone(), call("other")).await;
    let mut snapshot = exported_json(&app, &admin).await;
    for workflow in snapshot["workflows"].as_array_mut().unwrap() {
        if workflow["slug"] == "child" || workflow["slug"] == "other" {
            workflow["name"] = json!("Changed");
        }
    }
    let steps = diff_of(&app, &admin, &snapshot).await;
    // Control: the workflow only a user's workflow calls is not marked.
    assert!(
        step(&steps, "other").get("adminPower").is_none(),
        "{steps:?}"
    );
    let child = step(&steps, "child");
    assert_eq!(child["adminPower"], true, "{steps:?}");
    assert!(
        child["adminPowerReason"]
            .as_str()
            .unwrap()
            .contains("admin-caller"),
        "{child:?}"
    );
    let refused = apply(&app, &admin, json!({ "snapshot": snapshot })).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert!(
        refused.body["errors"][0]["field"]
            .as_str()
            .unwrap()
            .starts_with("workflows["),
        "{:?}",
        refused.body
    );
}

#[tokio::test]
async fn an_administrators_reset_of_factors_ends_that_persons_sessions_and_nobody_elses() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    let (enrolling, secret, _) = enrolled(&app, &admin, "reset@example.com").await;
    app.advance(chrono::Duration::seconds(30));
    let pending = challenge(&app, "reset@example.com").await;
    let signed_in = verify(&app.address, &app, &pending, &code(&app, &secret, 0)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let second = signed_in.data()["token"].as_str().unwrap().to_owned();
    app.create_user(&admin, "bystander@example.com", "password-1", None)
        .await;
    let bystander = app.login("bystander@example.com", "password-1").await;
    // Controls: every session works before the reset.
    for session in [&enrolling, &second, &bystander, &admin] {
        assert_eq!(
            app.get("/api/auth/me", session).await.status,
            StatusCode::OK
        );
    }
    let id = app.get("/api/auth/me", &enrolling).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reset = app
        .delete(&format!("/admin/api/users/{id}/mfa"), &admin)
        .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT, "{:?}", reset.body);
    for session in [&enrolling, &second] {
        let me = app.get("/api/auth/me", session).await;
        assert_eq!(me.status, StatusCode::UNAUTHORIZED, "{:?}", me.body);
    }
    for session in [&bystander, &admin] {
        assert_eq!(
            app.get("/api/auth/me", session).await.status,
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn a_session_counts_only_the_factors_that_existed_when_it_proved_one() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    let (enrolling, secret, _) = enrolled(&app, &admin, "again@example.com").await;
    app.advance(chrono::Duration::seconds(30));
    let pending = challenge(&app, "again@example.com").await;
    let signed_in = verify(&app.address, &app, &pending, &code(&app, &secret, 0)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let proven = signed_in.data()["token"].as_str().unwrap().to_owned();
    // The enrolling session turns TOTP off; a password session (the
    // account has no factor now) sets a new one up.
    app.advance(chrono::Duration::seconds(30));
    let off = delete_with(
        &app,
        "/api/auth/mfa/totp",
        &enrolling,
        json!({ "code": code(&app, &secret, 0) }),
    )
    .await;
    assert_eq!(off.status, StatusCode::NO_CONTENT, "{:?}", off.body);
    let password = app.login("again@example.com", "password-1").await;
    let started = app.post("/api/auth/mfa/totp", &password, json!({})).await;
    assert_eq!(started.status, StatusCode::OK, "{:?}", started.body);
    let renewed = crate::mfa::base32_decode(started.data()["secret"].as_str().unwrap());
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &password,
            json!({ "code": code(&app, &renewed, 0) }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    // The session that proved the old TOTP has not proved the new one.
    app.advance(chrono::Duration::seconds(30));
    let refused = delete_with(
        &app,
        "/api/auth/mfa/totp",
        &proven,
        json!({ "code": code(&app, &renewed, 0) }),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{:?}", refused.body);
    assert_eq!(refused.code(), "MFA_REQUIRED");
    // The session that enrolled it has, with the same request.
    let off = delete_with(
        &app,
        "/api/auth/mfa/totp",
        &password,
        json!({ "code": code(&app, &renewed, 0) }),
    )
    .await;
    assert_eq!(off.status, StatusCode::NO_CONTENT, "{:?}", off.body);
}

/// Whether an uncommitted transaction holds the role `name`: inserting it
/// waits on that transaction (and stops at a short lock timeout) rather
/// than going through (and being rolled back here).
async fn name_is_held(app: &TestApp, name: &str) -> bool {
    use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let probe = db.begin().await.unwrap();
    probe
        .execute_unprepared("SET LOCAL lock_timeout = '50ms'")
        .await
        .unwrap();
    let inserted = probe
        .execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "INSERT INTO svc.roles (id, name) VALUES (gen_random_uuid(), $1) \
             ON CONFLICT ((lower(name))) DO NOTHING",
            [name.into()],
        ))
        .await;
    probe.rollback().await.unwrap();
    db.close().await.unwrap();
    match inserted {
        Ok(_) => false,
        Err(error) if error.to_string().contains("lock timeout") => true,
        Err(error) => panic!("{error}"),
    }
}

#[tokio::test]
async fn a_whole_diff_stops_at_its_limit_and_nobody_waits_on_it_longer() {
    let app = spawn_app_with(|config| {
        config.snapshot_diff_limit = Duration::from_millis(300);
    })
    .await;
    let admin = app.admin_session().await;
    let base = exported_json(&app, &admin).await;
    let with_roles = |count: usize| {
        let mut snapshot = base.clone();
        let roles = snapshot["roles"].as_array_mut().unwrap();
        roles.extend(
            (0..count).map(|i| json!({ "name": format!("role-{i:05}"), "apiAccess": true })),
        );
        snapshot
    };
    // Control: a small diff answers under the same limit.
    let small = diff_of(&app, &admin, &with_roles(3)).await;
    assert_eq!(small.len(), 3, "{small:?}");

    // A diff too large to finish in time, and a session creating a name
    // the diff inserts first: it waits for the diff, and no longer than the
    // diff's limit.
    let large = with_roles(20_000);
    let started = Instant::now();
    let diff = app.post("/admin/api/snapshot/diff", &admin, json!({ "data": large }));
    let waiter = async {
        // Once the diff holds the name (never before: a name committed
        // after the diff's snapshot is a conflict it answers 409).
        let deadline = Instant::now() + Duration::from_secs(3);
        while !name_is_held(&app, "role-00000").await {
            assert!(Instant::now() < deadline, "the diff never held the name");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let created = app
            .post(
                "/admin/api/roles",
                &admin,
                json!({ "data": { "name": "role-00000", "apiAccess": true } }),
            )
            .await;
        (created, started.elapsed())
    };
    let (diff, (created, waited)) = tokio::join!(diff, waiter);
    assert_eq!(diff.status, StatusCode::BAD_REQUEST, "{:?}", diff.body);
    assert_eq!(diff.code(), "INVALID_QUERY");
    assert!(
        diff.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("too large to diff at once"),
        "{:?}",
        diff.body
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    // The refused diff is audited and changed nothing.
    let audit = app
        .get("/admin/api/audit?action=snapshot.diff", &admin)
        .await;
    assert_eq!(
        audit.data()[0]["details"]["failed"],
        true,
        "{:?}",
        audit.body
    );
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM svc.roles WHERE name LIKE 'role-%'")
            .await
            .as_deref(),
        Some("1")
    );
}

#[tokio::test]
async fn exports_and_stored_runs_keep_no_credential_of_an_http_step() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let url = "https://bot:pass-w0rd@hooks.example.test/in?page=2&token=t0k-123&API_KEY=k-456";
    let call = json!({ "id": "call", "type": "http", "method": "POST", "url": url,
        "headers": { "X-Auth-Token": "xt-789", "X-Request-Id": "r-1", "Accept": "application/json" },
        "body": {} });
    let id = published(
        &app,
        &admin,
        "notify",
        json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" }),
        json!([{ "id": "seen", "type": "transform", "output": {
                    "token": "{{start.data.query.token}}", "header": "{{start.data.meta.headers.x-auth-token}}" } },
               { "id": "f", "type": "finish", "result": "{{steps.seen.result}}" }]),
    )
    .await;
    // The http step is in the draft only: nothing is sent while the runs
    // below are stored.
    let edited = app
        .patch(
            &format!("/admin/api/workflows/{id}"),
            &admin,
            json!({ "data": { "steps": [call.clone()] } }),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{:?}", edited.body);

    let snapshot = exported_json(&app, &admin).await;
    let exported = &snapshot["workflows"][0]["draft"]["steps"][0];
    // Controls: what is no credential is kept as written.
    assert_eq!(
        exported["url"],
        "https://bot:[REDACTED]@hooks.example.test/in?page=2&token=[REDACTED]&API_KEY=[REDACTED]"
    );
    assert_eq!(exported["headers"]["X-Request-Id"], "r-1");
    assert_eq!(exported["headers"]["Accept"], "application/json");
    assert_eq!(exported["headers"]["X-Auth-Token"], "[REDACTED]");
    let text = snapshot.to_string();
    for secret in ["pass-w0rd", "t0k-123", "k-456", "xt-789"] {
        assert!(!text.contains(secret), "{secret} left in the export");
    }
    // Applied back (with a change beside it), the stored values stay.
    let mut changed = snapshot.clone();
    changed["workflows"][0]["name"] = json!("Notify");
    let applied = apply(&app, &admin, json!({ "snapshot": changed })).await;
    assert_eq!(applied.status, StatusCode::OK, "{:?}", applied.body);
    let stored = app.get(&format!("/admin/api/workflows/{id}"), &admin).await;
    assert_eq!(stored.data()["name"], "Notify");
    assert_eq!(stored.data()["steps"][0], call, "{:?}", stored.body);
    // Sent elsewhere, the step gets none of them.
    let mut moved = snapshot.clone();
    moved["workflows"][0]["draft"]["steps"][0]["url"] = json!(
        "https://bot:[REDACTED]@attacker.example.test/in?page=2&token=[REDACTED]&API_KEY=[REDACTED]"
    );
    let refused = apply(&app, &admin, json!({ "snapshot": moved })).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        refused.body["errors"][0]["field"],
        "workflows[0].draft.steps.call.url"
    );

    // A run's stored input and results hold no credential it received,
    // while its steps saw them.
    let run = app
        .client
        .post(format!(
            "{}/api/workflows/notify/webhook?page=3&token=q-secret-1",
            app.address
        ))
        .bearer_auth(&admin)
        .header("x-auth-token", "h-secret-2")
        .header("x-request-id", "r-2")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let run = TestApp::answer(run).await;
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    assert_eq!(
        run.data()["result"],
        json!({ "token": "q-secret-1", "header": "h-secret-2" })
    );
    let runs = history(&app, &admin, &id).await;
    let text = serde_json::to_string(&runs[0]).unwrap();
    assert!(text.contains("r-2") && text.contains("\"page\""), "{text}");
    for secret in ["q-secret-1", "h-secret-2"] {
        assert!(!text.contains(secret), "{secret} stored: {text}");
    }
}

#[tokio::test]
async fn a_renamed_table_reaches_the_published_webhook_at_once_on_every_instance() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    keyed_table(
        &app,
        &admin,
        "items",
        json!([{ "name": "title", "dataType": "text" }]),
        &["GET", "POST"],
    )
    .await;
    for title in ["one", "two"] {
        let row = app
            .post(
                "/api/data/app/items",
                &admin,
                json!({ "data": { "title": title } }),
            )
            .await;
        assert_eq!(row.status, StatusCode::CREATED, "{:?}", row.body);
    }
    published(
        &app,
        &admin,
        "list",
        json!({ "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" }),
        json!([{ "id": "q", "type": "query", "resource": "app.items", "sort": "id" },
               { "id": "f", "type": "finish", "result": "{{steps.q.result}}" }]),
    )
    .await;
    let peer = app.spawn_peer().await;
    let list = |address: String| {
        let app = &app;
        let admin = admin.clone();
        async move {
            let response = app
                .client
                .post(format!("{address}/api/workflows/list/webhook"))
                .bearer_auth(admin)
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            TestApp::answer(response).await
        }
    };
    // Controls: both instances run it (and keep its definition) before.
    for address in [app.address.clone(), peer.clone()] {
        let run = list(address).await;
        assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
        assert_eq!(run.data()["result"].as_array().map(Vec::len), Some(2));
    }
    let renamed = app
        .patch(
            "/admin/api/schema/app/tables/items",
            &admin,
            json!({ "data": { "name": "goods" } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    for address in [app.address.clone(), peer] {
        let run = list(address).await;
        assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
        assert_eq!(
            run.data()["result"].as_array().map(Vec::len),
            Some(2),
            "{:?}",
            run.body
        );
    }
}
