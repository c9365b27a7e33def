//! API.md 17's rules on second factors, through HTTP: an administrator
//! with a passkey and no TOTP finishes a password sign-in with the passkey
//! while `auth.mfa_required_for_admins` is on; factors change only from a
//! session that proved one; each rule after a control that passes.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app, spawn_app_with_clock};

use crate::mfa::{
    ask_code, base32_decode, challenge, code, delete_with, emailed_code, next_email,
    post_public as public,
};
use crate::passkeys::{ORIGIN, SoftPasskey, passkey_session, registered};

/// An administrator `email` (password `password-1`) with a passkey and no
/// TOTP: the first administrator's session and an ADMIN token, the
/// session that registered the passkey, and the passkey.
pub(crate) async fn passkey_admin(
    app: &TestApp,
    email: &str,
) -> (String, String, String, SoftPasskey) {
    let admin_session = app.admin_session().await;
    let admin = app.create_token(&admin_session, "ADMIN").await;
    app.create_user(
        &admin,
        email,
        "password-1",
        Some(vec![crate::ADMINS_ROLE.into()]),
    )
    .await;
    let first = app.login(email, "password-1").await;
    let (passkey, _) = registered(app, &first, "Key").await;
    (admin_session, admin, first, passkey)
}

/// The passkey options of `challenge`.
pub(crate) async fn passkey_options(app: &TestApp, challenge: &str) -> Value {
    let options = public(
        app,
        "/api/auth/mfa/passkey",
        json!({ "challenge": challenge }),
    )
    .await;
    assert_eq!(options.status, StatusCode::OK, "{:?}", options.body);
    options.data()["options"].clone()
}

pub(crate) async fn verify_with(app: &TestApp, challenge: &str, credential: &Value) -> Answer {
    public(
        app,
        "/api/auth/mfa/verify",
        json!({ "challenge": challenge, "credential": credential }),
    )
    .await
}

fn assert_refused(answer: &Answer, code: &str, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::FORBIDDEN,
        "{what}: {:?}",
        answer.body
    );
    assert_eq!(answer.code(), code, "{what}");
}

#[tokio::test]
async fn an_administrators_passkey_is_the_second_step_of_a_password_sign_in() {
    let app = spawn_app().await;
    let (admin_session, admin, first, mut passkey) = passkey_admin(&app, "boss@example.com").await;
    // Control: the passkey signs in on its own, and while the rule is off
    // the password alone makes a session (it proved no factor).
    passkey_session(&app, &mut passkey).await;
    let password_only = app.login("boss@example.com", "password-1").await;

    let on = app
        .patch(
            "/admin/api/settings",
            &admin_session,
            json!({ "data": { "auth.mfa_required_for_admins": true } }),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK, "{:?}", on.body);
    // The session that registered the passkey proved it; the one made
    // with the password alone is held at enrollment.
    assert_eq!(
        app.get("/admin/api/users", &first).await.status,
        StatusCode::OK
    );
    assert_refused(
        &app.get("/admin/api/users", &password_only).await,
        "MFA_ENROLLMENT_REQUIRED",
        "a password-only session",
    );

    // The right password is now a challenge, finished with the passkey.
    let pending = challenge(&app, "boss@example.com").await;
    let options = passkey_options(&app, &pending).await;
    let allowed = options["allowCredentials"].as_array().expect("allowed");
    assert_eq!(allowed.len(), 1, "{options}");
    // A passkey of another account does not finish it, and counts as a
    // wrong code.
    let stranger_session = {
        app.create_user(&admin, "other@example.com", "password-1", None)
            .await;
        app.login("other@example.com", "password-1").await
    };
    let (mut stranger, _) = registered(&app, &stranger_session, "Other").await;
    let wrong = verify_with(&app, &pending, &stranger.assert(&options, ORIGIN)).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{:?}", wrong.body);
    assert_eq!(wrong.code(), "INVALID_MFA_CODE");
    // The options were used by that answer: the owner asks again.
    let options = passkey_options(&app, &pending).await;
    let signed_in = verify_with(&app, &pending, &passkey.assert(&options, ORIGIN)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let session = signed_in.data()["token"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get("/admin/api/users", &session).await.status,
        StatusCode::OK
    );
    // Single-use: the challenge is spent.
    let again = public(
        &app,
        "/api/auth/mfa/passkey",
        json!({ "challenge": pending }),
    )
    .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert_eq!(again.code(), "INVALID_TOKEN");
    // Neither a code nor a credential, or both: a clear 400.
    let neither = public(&app, "/api/auth/mfa/verify", json!({ "challenge": "x" })).await;
    assert_eq!(neither.status, StatusCode::BAD_REQUEST);
    assert_eq!(neither.code(), "INVALID_PAYLOAD");
    // The audit says how the session was made.
    let audit = app
        .get("/admin/api/audit?action=auth.login&limit=50", &admin)
        .await;
    assert!(
        audit
            .data()
            .as_array()
            .unwrap()
            .iter()
            .any(|e| { e["details"]["mfa"] == "passkey" && e["details"]["method"] == "password" }),
        "{:?}",
        audit.body
    );
}

#[tokio::test]
async fn factors_change_only_from_a_session_that_proved_one() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "ann@example.com", "password-1", None)
        .await;
    // The first factor is added from a password session, which then counts
    // as made with it.
    let enrolling = app.login("ann@example.com", "password-1").await;
    let (mut passkey, first) = registered(&app, &enrolling, "First").await;
    let (_, second) = registered(&app, &enrolling, "Second").await;

    // Control: a passkey session adds and removes factors.
    let proven = passkey_session(&app, &mut passkey).await;
    let removed = app
        .delete(
            &format!("/api/auth/passkeys/{}", second["id"].as_str().unwrap()),
            &proven,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{:?}", removed.body);
    let started = app.post("/api/auth/mfa/totp", &proven, json!({})).await;
    assert_eq!(started.status, StatusCode::OK, "{:?}", started.body);

    // A password alone (no challenge for a passkey-only account that is
    // not an administrator) changes nothing.
    let password_only = app.login("ann@example.com", "password-1").await;
    let first_id = first["id"].as_str().unwrap();
    for (what, answer) in [
        (
            "TOTP setup",
            app.post("/api/auth/mfa/totp", &password_only, json!({}))
                .await,
        ),
        (
            "TOTP confirm",
            app.post(
                "/api/auth/mfa/totp/confirm",
                &password_only,
                json!({ "code": "123456" }),
            )
            .await,
        ),
        (
            "passkey registration",
            app.post(
                "/api/auth/passkeys/register/start",
                &password_only,
                json!({}),
            )
            .await,
        ),
        (
            "passkey removal",
            app.delete(&format!("/api/auth/passkeys/{first_id}"), &password_only)
                .await,
        ),
    ] {
        assert_refused(&answer, "MFA_REQUIRED", what);
    }
    let me = app.get("/api/auth/me", &password_only).await;
    assert_eq!(me.data()["mfa"]["passkeys"], 1);

    // A TOTP account: the challenge's code proves it, and a passkey may
    // finish the challenge too.
    let secret = base32_decode(started.data()["secret"].as_str().unwrap());
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &proven,
            json!({ "code": code(&app, &secret, 0) }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    // The password session made before TOTP came may not turn it off,
    // even with a right code.
    let recovery = confirmed.data()["recoveryCodes"]
        .as_array()
        .unwrap()
        .clone();
    let turned_off = delete_with(
        &app,
        "/api/auth/mfa/totp",
        &password_only,
        json!({ "code": recovery[0] }),
    )
    .await;
    assert_refused(&turned_off, "MFA_REQUIRED", "TOTP delete");
    assert_eq!(
        app.get("/api/auth/me", &proven).await.data()["mfa"]["totp"],
        true
    );
    let pending = challenge(&app, "ann@example.com").await;
    let options = passkey_options(&app, &pending).await;
    let signed_in = verify_with(&app, &pending, &passkey.assert(&options, ORIGIN)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let session = signed_in.data()["token"].as_str().unwrap().to_owned();
    let (_, third) = registered(&app, &session, "Third").await;
    assert!(third["id"].is_string());
    // The session that finished the challenge may turn TOTP off.
    let turned_off = delete_with(
        &app,
        "/api/auth/mfa/totp",
        &session,
        json!({ "code": recovery[1] }),
    )
    .await;
    assert_eq!(
        turned_off.status,
        StatusCode::NO_CONTENT,
        "{:?}",
        turned_off.body
    );

    // An account with TOTP alone has no passkey to offer.
    app.create_user(&admin, "bob@example.com", "password-1", None)
        .await;
    let bob = app.login("bob@example.com", "password-1").await;
    let started = app.post("/api/auth/mfa/totp", &bob, json!({})).await;
    let secret = base32_decode(started.data()["secret"].as_str().unwrap());
    app.post(
        "/api/auth/mfa/totp/confirm",
        &bob,
        json!({ "code": code(&app, &secret, 0) }),
    )
    .await;
    let pending = challenge(&app, "bob@example.com").await;
    let none = public(
        &app,
        "/api/auth/mfa/passkey",
        json!({ "challenge": pending }),
    )
    .await;
    assert_eq!(none.status, StatusCode::BAD_REQUEST, "{:?}", none.body);
    assert_eq!(none.code(), "INVALID_PAYLOAD");
}

/// The administrators' reset of someone's factors is itself a factor
/// change: an administrator whose account has a factor resets only from a
/// session that proved one (decisions.md, "Second factors and the
/// administrators' reset").
#[tokio::test]
async fn an_administrator_with_a_factor_resets_factors_only_from_a_proven_session() {
    let app = spawn_app().await;
    let (_, admin, proven, _) = passkey_admin(&app, "boss@example.com").await;
    let id = app
        .create_user(&admin, "ann@example.com", "password-1", None)
        .await;
    let ann = app.login("ann@example.com", "password-1").await;
    registered(&app, &ann, "Ann's").await;
    registered(&app, &ann, "Ann's spare").await;
    let reset = format!("/admin/api/users/{id}/mfa");
    // The administrator's password alone (the rule for administrators is
    // off here, so no challenge came): refused.
    let password_only = app.login("boss@example.com", "password-1").await;
    let refused = app.delete(&reset, &password_only).await;
    assert_refused(&refused, "MFA_REQUIRED", "the administrators' reset");
    assert_eq!(
        app.get("/api/auth/me", &ann).await.data()["mfa"]["passkeys"],
        2
    );
    // The session that added the administrator's passkey may.
    let done = app.delete(&reset, &proven).await;
    assert_eq!(done.status, StatusCode::NO_CONTENT, "{:?}", done.body);
    let ann = app.login("ann@example.com", "password-1").await;
    assert_eq!(
        app.get("/api/auth/me", &ann).await.data()["mfa"]["passkeys"],
        0
    );
}

#[tokio::test]
async fn every_401_names_the_bearer_scheme() {
    let app = spawn_app().await;
    for path in ["/api/auth/me", "/admin/api/users", "/api/auth/sessions"] {
        let answer = app.get(path, "not-a-real-session").await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(
            answer
                .headers
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "{path}"
        );
    }
    let wrong = app.login_answer("nobody@example.com", "password-1").await;
    assert_eq!(wrong.headers.get("www-authenticate").unwrap(), "Bearer");
    // Other refusals do not carry it.
    let admin = app.admin_session().await;
    let missing = app.get("/admin/api/users/not-an-id", &admin).await;
    assert!(missing.headers.get("www-authenticate").is_none());
}

/// A passkey-only administrator who signs in with an emailed code is held
/// at a challenge like a password sign-in, and finishes it with the
/// passkey; the audit says the session was made by an email code and
/// proved the passkey.
#[tokio::test]
async fn an_email_code_sign_in_of_a_passkey_only_administrator_finishes_with_the_passkey() {
    let app = spawn_app().await;
    let (admin_session, admin, _, mut passkey) = passkey_admin(&app, "keyholder@example.com").await;
    let settings = app
        .patch(
            "/admin/api/settings",
            &admin_session,
            json!({ "data": { "auth.email_code_enabled": true } }),
        )
        .await;
    assert_eq!(settings.status, StatusCode::OK, "{:?}", settings.body);
    // Control: while the rule is off, the code alone signs in.
    let mail = ask_code(&app, "keyholder@example.com").await;
    let typed = json!({ "email": "keyholder@example.com", "code": emailed_code(&mail.text) });
    let alone = public(&app, "/api/auth/email-code/verify", typed).await;
    assert_eq!(alone.status, StatusCode::OK, "{:?}", alone.body);

    let on = app
        .patch(
            "/admin/api/settings",
            &admin_session,
            json!({ "data": { "auth.mfa_required_for_admins": true } }),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK, "{:?}", on.body);
    let count = app.smtp.emails().len();
    let mail = {
        let asked = public(
            &app,
            "/api/auth/email-code",
            json!({ "email": "keyholder@example.com" }),
        )
        .await;
        assert_eq!(asked.status, StatusCode::NO_CONTENT);
        next_email(&app, count).await
    };
    let typed = json!({ "email": "keyholder@example.com", "code": emailed_code(&mail.text) });
    let held = public(&app, "/api/auth/email-code/verify", typed).await;
    assert_eq!(held.status, StatusCode::UNAUTHORIZED, "{:?}", held.body);
    assert_eq!(held.code(), "MFA_REQUIRED");
    let pending = held.body["errors"][0]["challenge"]
        .as_str()
        .expect("challenge")
        .to_owned();
    let options = passkey_options(&app, &pending).await;
    let signed_in = verify_with(&app, &pending, &passkey.assert(&options, ORIGIN)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    let session = signed_in.data()["token"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get("/admin/api/users", &session).await.status,
        StatusCode::OK
    );
    let audit = app
        .get("/admin/api/audit?action=auth.login&limit=50", &admin)
        .await;
    assert!(
        audit.data().as_array().unwrap().iter().any(|e| {
            e["details"]["mfa"] == "passkey" && e["details"]["method"] == "email_code"
        }),
        "{:?}",
        audit.body
    );
}

/// Two first factors added at once, from two sessions that proved none:
/// the gate is read again under the account's lock in the writing
/// transaction, so one is added and the other refused (API.md 17, rule 3).
#[tokio::test]
async fn two_first_factors_at_once_add_one() {
    use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "cy@example.com", "password-1", None)
        .await;
    let by_passkey = app.login("cy@example.com", "password-1").await;
    let by_totp = app.login("cy@example.com", "password-1").await;
    let start = app
        .post("/api/auth/passkeys/register/start", &by_passkey, json!({}))
        .await;
    let (_, credential) = SoftPasskey::register(&start.data()["options"], ORIGIN);
    let started = app.post("/api/auth/mfa/totp", &by_totp, json!({})).await;
    let secret = base32_decode(started.data()["secret"].as_str().unwrap());

    // Both requests pass the gate read at the request, then wait for the
    // account's row, which this transaction holds.
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let lock = db.begin().await.unwrap();
    lock.execute_unprepared("SELECT 1 FROM svc.users WHERE email = 'cy@example.com' FOR UPDATE")
        .await
        .unwrap();
    let release = async {
        // Backends of this database held up by a lock (the second request
        // may queue behind the first rather than this transaction).
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
            AND cardinality(pg_blocking_pids(pid)) > 0";
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let row = db
                .query_one_raw(Statement::from_string(DbBackend::Postgres, waiting))
                .await
                .unwrap()
                .unwrap();
            if row.try_get_by_index::<i64>(0).unwrap() >= 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "both enrolments wait for the account's lock"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        lock.rollback().await.unwrap();
    };
    let (passkey, totp, ()) = tokio::join!(
        app.post(
            "/api/auth/passkeys/register/finish",
            &by_passkey,
            json!({ "challengeId": start.data()["challengeId"], "credential": credential, "name": "Mine" }),
        ),
        app.post(
            "/api/auth/mfa/totp/confirm",
            &by_totp,
            json!({ "code": code(&app, &secret, 0) }),
        ),
        release
    );
    let (added, refused) = if passkey.status == StatusCode::CREATED {
        (passkey, totp)
    } else {
        (totp, passkey)
    };
    assert!(added.status.is_success(), "{:?}", added.body);
    assert_refused(&refused, "MFA_REQUIRED", "the second first factor");
    let me = app.get("/api/auth/me", &by_totp).await;
    let factors = me.data()["mfa"].clone();
    assert_eq!(
        u64::from(factors["totp"] == true) + factors["passkeys"].as_u64().unwrap(),
        1,
        "{factors}"
    );
    db.close().await.unwrap();
}
