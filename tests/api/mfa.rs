//! Second factors (API.md 14): TOTP enrollment, the sign-in challenge,
//! replay refusal, recovery codes, the challenge's death and expiry,
//! lockout, turning off and the administrator's reset; codes computed here
//! from the secret the route answers, at the server's clock.

use kernel::Clock;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app, spawn_app_with_clock};

/// RFC 4648 base32 without padding, decoded.
pub(crate) fn base32_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut out, mut buffer, mut bits) = (Vec::new(), 0u32, 0u32);
    for byte in text.bytes() {
        let value = ALPHABET.iter().position(|&a| a == byte).expect("base32") as u32;
        buffer = (buffer << 5) | value;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    out
}

/// The six digits of `secret` at the app's clock, `steps` steps on.
pub(crate) fn code(app: &TestApp, secret: &[u8], steps: i64) -> String {
    let now = app.clock.as_ref().expect("manual clock").now();
    format!(
        "{:06}",
        auth::totp_code(secret, auth::totp_step(now) + steps)
    )
}

pub(crate) async fn verify(address: &str, app: &TestApp, challenge: &str, code: &str) -> Answer {
    let response = app
        .client
        .post(format!("{address}/api/auth/mfa/verify"))
        .json(&json!({ "challenge": challenge, "code": code }))
        .send()
        .await
        .expect("sent");
    TestApp::answer(response).await
}

/// Signs in with the right password: the challenge of the MFA_REQUIRED answer.
pub(crate) async fn challenge(app: &TestApp, email: &str) -> String {
    let answer = app.login_answer(email, "password-1").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{:?}", answer.body);
    assert_eq!(answer.code(), "MFA_REQUIRED");
    answer.body["errors"][0]["challenge"]
        .as_str()
        .expect("challenge")
        .to_owned()
}

/// A user with TOTP on: their session, secret and recovery codes.
pub(crate) async fn enrolled(
    app: &TestApp,
    admin: &str,
    email: &str,
) -> (String, Vec<u8>, Vec<String>) {
    app.create_user(admin, email, "password-1", None).await;
    let session = app.login(email, "password-1").await;
    let started = app.post("/api/auth/mfa/totp", &session, json!({})).await;
    assert_eq!(started.status, StatusCode::OK, "{:?}", started.body);
    let secret = base32_decode(started.data()["secret"].as_str().unwrap());
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &session,
            json!({ "code": code(app, &secret, 0) }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    let codes = confirmed.data()["recoveryCodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    (session, secret, codes)
}

pub(crate) fn delete_with(
    app: &TestApp,
    path: &str,
    bearer: &str,
    body: Value,
) -> impl Future<Output = Answer> {
    app.call(Method::DELETE, path, Some(bearer), Some(body))
}

#[tokio::test]
async fn totp_enrolls_then_signs_in_through_a_challenge_once_per_code() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    // Counted on their own (login_limits.rs, account.rs): here the rules.
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.account_rate_limit_per_minute": 0 } }),
    )
    .await;
    app.create_user(&admin, "totp@example.com", "password-1", None)
        .await;
    let session = app.login("totp@example.com", "password-1").await;
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.data()["mfa"], json!({ "totp": false, "passkeys": 0 }));

    // Enrollment: a pending secret, a new one replacing it, then confirmed.
    let first = app.post("/api/auth/mfa/totp", &session, json!({})).await;
    let first_secret = base32_decode(first.data()["secret"].as_str().unwrap());
    let started = app.post("/api/auth/mfa/totp", &session, json!({})).await;
    assert_eq!(started.status, StatusCode::OK);
    let url = started.data()["otpauthUrl"].as_str().unwrap();
    let encoded = started.data()["secret"].as_str().unwrap();
    assert!(
        url.starts_with("otpauth://totp/Tessera:totp@example.com?")
            && url.contains(&format!("secret={encoded}"))
            && url.contains("issuer=Tessera"),
        "{url}"
    );
    let secret = base32_decode(encoded);
    assert_eq!(secret.len(), 20);
    // A pending secret changes nothing at sign-in.
    app.login("totp@example.com", "password-1").await;
    for wrong in [code(&app, &first_secret, 0), "12345".into(), "abc".into()] {
        let refused = app
            .post(
                "/api/auth/mfa/totp/confirm",
                &session,
                json!({ "code": wrong }),
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.code(), "INVALID_MFA_CODE");
    }
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &session,
            json!({ "code": code(&app, &secret, 0) }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    let recovery: Vec<String> =
        serde_json::from_value(confirmed.data()["recoveryCodes"].clone()).unwrap();
    assert_eq!(recovery.len(), 10);
    let again = app.post("/api/auth/mfa/totp", &session, json!({})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let me = app.get("/api/auth/me", &session).await;
    assert_eq!(me.data()["mfa"]["totp"], true);
    // Secrets and hashes are stored, never the codes.
    let stored = app
        .db
        .sql("SELECT count(*)::text FROM svc.mfa_recovery_codes WHERE length(code_hash) = 32")
        .await;
    assert_eq!(stored.as_deref(), Some("10"));

    // A wrong password says nothing about the second factor.
    let wrong = app.login_answer("totp@example.com", "wrong").await;
    assert_eq!(wrong.code(), "AUTHENTICATION_REQUIRED");
    assert!(wrong.body["errors"][0].get("challenge").is_none());

    // The code of the step confirmed is used; the next step's works, once,
    // and the challenge is finished on another instance.
    let peer = app.spawn_peer().await;
    let pending = challenge(&app, "totp@example.com").await;
    let replay = verify(&app.address, &app, &pending, &code(&app, &secret, 0)).await;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED);
    assert_eq!(replay.code(), "INVALID_MFA_CODE");
    app.advance(chrono::Duration::seconds(30));
    let signed_in = verify(&peer, &app, &pending, &code(&app, &secret, 0)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    assert_eq!(signed_in.data()["user"]["email"], "totp@example.com");
    let token = signed_in.data()["token"].as_str().unwrap();
    assert_eq!(app.get("/api/auth/me", token).await.status, StatusCode::OK);
    let used = verify(&app.address, &app, &pending, &code(&app, &secret, 1)).await;
    assert_eq!(used.status, StatusCode::BAD_REQUEST);
    assert_eq!(used.code(), "INVALID_TOKEN");
    let unknown = verify(&app.address, &app, "no-such-challenge", "123456").await;
    assert_eq!(unknown.code(), "INVALID_TOKEN");
    // The same code on a new challenge is a replay.
    let next = challenge(&app, "totp@example.com").await;
    let replay = verify(&app.address, &app, &next, &code(&app, &secret, 0)).await;
    assert_eq!(replay.code(), "INVALID_MFA_CODE");
    // A step of drift either way; not two.
    let far = verify(&app.address, &app, &next, &code(&app, &secret, 2)).await;
    assert_eq!(far.code(), "INVALID_MFA_CODE");
    let ahead = verify(&app.address, &app, &next, &code(&app, &secret, 1)).await;
    assert_eq!(ahead.status, StatusCode::OK, "{:?}", ahead.body);

    // A recovery code works once, typed in any case.
    let next = challenge(&app, "totp@example.com").await;
    let typed = recovery[0].to_uppercase();
    let recovered = verify(&app.address, &app, &next, &typed).await;
    assert_eq!(recovered.status, StatusCode::OK, "{:?}", recovered.body);
    let next = challenge(&app, "totp@example.com").await;
    let reused = verify(&app.address, &app, &next, &recovery[0]).await;
    assert_eq!(reused.code(), "INVALID_MFA_CODE");

    // The fifth wrong code ends the challenge (that answer is still 401).
    let next = challenge(&app, "totp@example.com").await;
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(verify(&app.address, &app, &next, "000000").await.status);
    }
    assert!(
        answers.iter().all(|s| *s == StatusCode::UNAUTHORIZED),
        "{answers:?}"
    );
    app.advance(chrono::Duration::seconds(30));
    let dead = verify(&app.address, &app, &next, &code(&app, &secret, 0)).await;
    assert_eq!(dead.code(), "INVALID_TOKEN");
    // A challenge lives five minutes.
    let next = challenge(&app, "totp@example.com").await;
    app.advance(chrono::Duration::minutes(5));
    let expired = verify(&app.address, &app, &next, &code(&app, &secret, 0)).await;
    assert_eq!(expired.code(), "INVALID_TOKEN");

    // A sign-in that succeeds restarts the count of attempts.
    app.advance(chrono::Duration::seconds(30));
    let next = challenge(&app, "totp@example.com").await;
    let fine = verify(&app.address, &app, &next, &code(&app, &secret, 0)).await;
    assert_eq!(fine.status, StatusCode::OK, "{:?}", fine.body);

    // Turned off with a code: the password alone signs in again.
    let path = "/api/auth/mfa/totp";
    let refused = delete_with(&app, path, &session, json!({ "code": "000000" })).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(refused.code(), "INVALID_MFA_CODE");
    app.advance(chrono::Duration::seconds(30));
    let off = delete_with(
        &app,
        path,
        &session,
        json!({ "code": code(&app, &secret, 0) }),
    )
    .await;
    assert_eq!(off.status, StatusCode::NO_CONTENT, "{:?}", off.body);
    app.login("totp@example.com", "password-1").await;
    let left = app
        .db
        .sql("SELECT count(*)::text FROM svc.mfa_recovery_codes")
        .await;
    assert_eq!(left.as_deref(), Some("0"));
}

#[tokio::test]
async fn wrong_codes_lock_the_account_and_an_administrator_resets_the_factors() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.lockout_threshold": 3, "auth.lockout_minutes": 10 } }),
    )
    .await;
    let (session, secret, recovery) = enrolled(&app, &admin, "lockme@example.com").await;
    app.advance(chrono::Duration::seconds(30));
    // The right password counts as the first attempt until the code
    // finishes the sign-in; two wrong codes make three: locked.
    let pending = challenge(&app, "lockme@example.com").await;
    for _ in 0..2 {
        let wrong = verify(&app.address, &app, &pending, "000000").await;
        assert_eq!(wrong.code(), "INVALID_MFA_CODE");
    }
    let locked = verify(&app.address, &app, &pending, &code(&app, &secret, 0)).await;
    assert_eq!(locked.status, StatusCode::UNAUTHORIZED);
    assert_eq!(locked.code(), "INVALID_MFA_CODE");
    let password = app.login_answer("lockme@example.com", "password-1").await;
    assert_eq!(password.code(), "AUTHENTICATION_REQUIRED");
    app.advance(chrono::Duration::minutes(11));
    let pending = challenge(&app, "lockme@example.com").await;
    let done = verify(&app.address, &app, &pending, &recovery[1]).await;
    assert_eq!(done.status, StatusCode::OK, "{:?}", done.body);

    // A stolen session guesses the code that turns TOTP off no more than a
    // sign-in would: the third wrong code locks the account.
    for _ in 0..3 {
        let wrong = delete_with(
            &app,
            "/api/auth/mfa/totp",
            &session,
            json!({ "code": "000000" }),
        )
        .await;
        assert_eq!(wrong.code(), "INVALID_MFA_CODE");
    }
    app.advance(chrono::Duration::seconds(30));
    let right = json!({ "code": code(&app, &secret, 0) });
    let locked = delete_with(&app, "/api/auth/mfa/totp", &session, right).await;
    assert_eq!(locked.code(), "INVALID_MFA_CODE");
    let password = app.login_answer("lockme@example.com", "password-1").await;
    assert_eq!(password.code(), "AUTHENTICATION_REQUIRED");
    app.advance(chrono::Duration::minutes(11));

    // Only administrators reset a user's factors.
    let id = app.get("/api/auth/me", &session).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/admin/api/users/{id}/mfa");
    assert_eq!(
        app.delete(&path, &session).await.status,
        StatusCode::FORBIDDEN
    );
    let unknown = app
        .delete(
            "/admin/api/users/00000000-0000-7000-8000-00000000dead/mfa",
            &admin,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let user = app.get(&format!("/admin/api/users/{id}"), &admin).await;
    assert_eq!(user.data()["mfa"]["totp"], true);
    assert_eq!(
        app.delete(&path, &admin).await.status,
        StatusCode::NO_CONTENT
    );
    let user = app.get(&format!("/admin/api/users/{id}"), &admin).await;
    assert_eq!(user.data()["mfa"], json!({ "totp": false, "passkeys": 0 }));
    app.login("lockme@example.com", "password-1").await;
}

#[tokio::test]
async fn administrators_without_a_second_factor_only_enroll_while_it_is_required() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    let admin_token = app.create_token(&admin, "ADMIN").await;
    app.create_user(&admin, "plain@example.com", "password-1", None)
        .await;
    // A read the Data API answers, so that it remembers the caller.
    let rows = "/api/data/svc/email_templates";
    assert_eq!(app.get(rows, &admin).await.status, StatusCode::OK);
    let on = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "auth.mfa_required_for_admins": true } }),
        )
        .await;
    assert_eq!(on.status, StatusCode::OK, "{:?}", on.body);
    // The administrator's session reaches only itself and its enrollment.
    for path in [
        rows,
        rows,
        "/admin/api/users",
        "/api/auth/sessions",
        "/api/auth/tokens",
    ] {
        let refused = app.get(path, &admin).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(refused.code(), "MFA_ENROLLMENT_REQUIRED", "{path}");
    }
    assert_eq!(app.get("/api/auth/me", &admin).await.status, StatusCode::OK);
    // Tokens, and people who are not administrators, are not concerned.
    assert_eq!(
        app.get("/admin/api/users", &admin_token).await.status,
        StatusCode::OK
    );
    let plain = app.login("plain@example.com", "password-1").await;
    assert_eq!(
        app.get("/api/auth/sessions", &plain).await.status,
        StatusCode::OK
    );
    // Enrolled, the same session goes on.
    let started = app.post("/api/auth/mfa/totp", &admin, json!({})).await;
    assert_eq!(started.status, StatusCode::OK, "{:?}", started.body);
    let secret = base32_decode(started.data()["secret"].as_str().unwrap());
    let confirmed = app
        .post(
            "/api/auth/mfa/totp/confirm",
            &admin,
            json!({ "code": code(&app, &secret, 0) }),
        )
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{:?}", confirmed.body);
    assert_eq!(
        app.get("/admin/api/users", &admin).await.status,
        StatusCode::OK
    );
    // Another administrator's session, signed in without a factor, is refused
    // on every instance, and may sign out.
    let other = app
        .create_user(
            &admin,
            "second@example.com",
            "password-1",
            Some(vec![crate::ADMINS_ROLE.into()]),
        )
        .await;
    let second = app.login("second@example.com", "password-1").await;
    let peer = app.spawn_peer().await;
    let response = app
        .client
        .get(format!("{peer}/admin/api/users/{other}"))
        .bearer_auth(&second)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let out = app.post("/api/auth/logout", &second, json!({})).await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
}

/// The six digits an emailed code's text carries.
pub(crate) fn emailed_code(text: &str) -> String {
    let at = text.find("code is ").expect("the code's sentence") + "code is ".len();
    text[at..at + 6].to_owned()
}

pub(crate) async fn post_public(app: &TestApp, path: &str, body: Value) -> Answer {
    app.call(Method::POST, path, None, Some(body)).await
}

#[tokio::test]
async fn email_codes_sign_in_once_while_enabled() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.create_user(&admin, "coder@example.com", "password-1", None)
        .await;
    let ask = json!({ "email": "coder@example.com" });
    // Off: the same 204, nothing sent, every verify refused.
    let off = post_public(&app, "/api/auth/email-code", ask.clone()).await;
    assert_eq!(off.status, StatusCode::NO_CONTENT);
    let refused = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "email": "coder@example.com", "code": "123456" }),
    )
    .await;
    assert_eq!(refused.code(), "INVALID_TOKEN");
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.email_code_enabled": true } }),
    )
    .await;
    // An unknown address gets the same 204.
    let unknown = post_public(
        &app,
        "/api/auth/email-code",
        json!({ "email": "nobody@example.com" }),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NO_CONTENT);

    // The code typed with the email signs in once, and verifies the email.
    let mail = ask_code(&app, "coder@example.com").await;
    let code = emailed_code(&mail.text);
    let typed = json!({ "email": "CODER@example.com", "code": code });
    let signed_in = post_public(&app, "/api/auth/email-code/verify", typed.clone()).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{:?}", signed_in.body);
    assert_eq!(signed_in.data()["user"]["emailVerified"], true);
    let token = signed_in.data()["token"].as_str().unwrap();
    assert_eq!(app.get("/api/auth/me", token).await.status, StatusCode::OK);
    let again = post_public(&app, "/api/auth/email-code/verify", typed).await;
    assert_eq!(again.code(), "INVALID_TOKEN");
    let link = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "token": mail.token("code").unwrap() }),
    )
    .await;
    assert_eq!(link.code(), "INVALID_TOKEN", "link and code are one");
    assert!(
        app.smtp
            .emails()
            .iter()
            .all(|e| e.to.iter().all(|t| t != "nobody@example.com"))
    );

    // A newer code ends the older; five wrong codes end the pending one.
    let first = ask_code(&app, "coder@example.com").await;
    let count = app.smtp.emails().len();
    post_public(&app, "/api/auth/email-code", ask.clone()).await;
    let second = next_email(&app, count).await;
    let old = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "token": first.token("code").unwrap() }),
    )
    .await;
    assert_eq!(old.code(), "INVALID_TOKEN");
    let right = emailed_code(&second.text);
    let wrong = if right == "000000" {
        "111111"
    } else {
        "000000"
    };
    for _ in 0..5 {
        let answer = post_public(
            &app,
            "/api/auth/email-code/verify",
            json!({ "email": "coder@example.com", "code": wrong }),
        )
        .await;
        assert_eq!(answer.code(), "INVALID_TOKEN");
    }
    let dead = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "email": "coder@example.com", "code": right }),
    )
    .await;
    assert_eq!(dead.code(), "INVALID_TOKEN");

    // The link works alone; an account with TOTP on goes on to its challenge.
    let (_, _, _) = enrolled(&app, &admin, "both@example.com").await;
    let mail = ask_code(&app, "both@example.com").await;
    let challenged = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "token": mail.token("code").unwrap() }),
    )
    .await;
    assert_eq!(
        challenged.status,
        StatusCode::UNAUTHORIZED,
        "{:?}",
        challenged.body
    );
    assert_eq!(challenged.code(), "MFA_REQUIRED");
    // Expired after 15 minutes.
    let count = app.smtp.emails().len();
    post_public(&app, "/api/auth/email-code", ask).await;
    let late_mail = next_email(&app, count).await;
    app.advance(chrono::Duration::minutes(16));
    let late = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "email": "coder@example.com", "code": emailed_code(&late_mail.text) }),
    )
    .await;
    assert_eq!(late.code(), "INVALID_TOKEN");
}

/// The first email received after the `count` before it.
pub(crate) async fn next_email(app: &TestApp, count: usize) -> testkit::ReceivedEmail {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(email) = app.smtp.emails().get(count) {
            return email.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no email came");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The median of `times`.
fn median(mut times: Vec<std::time::Duration>) -> std::time::Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

/// Median times of a wrong and of a right code finishing a challenge,
/// interleaved (the order alternating) so that both see the same load.
async fn code_times(app: &TestApp, secret: &[u8]) -> (std::time::Duration, std::time::Duration) {
    let (mut wrong, mut right) = (Vec::new(), Vec::new());
    for i in 0..15 {
        let (first, second) = (
            challenge(app, "timed@example.com").await,
            challenge(app, "timed@example.com").await,
        );
        app.advance(chrono::Duration::seconds(30));
        let good = code(app, secret, 0);
        let mut calls = [(&first, "000000", false), (&second, good.as_str(), true)];
        if i % 2 == 1 {
            calls.reverse();
        }
        for (pending, typed, is_right) in calls {
            let started = std::time::Instant::now();
            let answer = verify(&app.address, app, pending, typed).await;
            let took = started.elapsed();
            assert_eq!(
                answer.status == StatusCode::OK,
                is_right,
                "{:?}",
                answer.body
            );
            if is_right {
                right.push(took)
            } else {
                wrong.push(took)
            }
        }
    }
    (median(wrong), median(right))
}

#[tokio::test]
async fn a_wrong_code_takes_as_long_as_a_right_one() {
    let app = spawn_app_with_clock().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.login_rate_limit_per_minute": 0,
                          "auth.account_rate_limit_per_minute": 0,
                          "auth.lockout_threshold": 1000 } }),
    )
    .await;
    let (_, secret, _) = enrolled(&app, &admin, "timed@example.com").await;
    // A wrong code runs the statements and the transaction a right one
    // does; the right one also stores its session's row (about 0.3 ms, 6 to
    // 11% on a loaded debug build). A wrong code that skipped its
    // transaction answers over 40% sooner (tried). A systematic difference
    // shows in every measurement; noise of the machine rarely in three in
    // a row.
    let mut gaps = Vec::new();
    for _ in 0..3 {
        let (wrong, right) = code_times(&app, &secret).await;
        let gap = wrong.abs_diff(right).as_secs_f64() / wrong.max(right).as_secs_f64();
        eprintln!(
            "wrong {wrong:?} vs right {right:?}: {:.0}% apart",
            gap * 100.0
        );
        if gap <= 0.20 {
            return;
        }
        gaps.push(format!(
            "wrong {wrong:?} vs right {right:?}: {:.0}% apart",
            gap * 100.0
        ));
    }
    panic!("{gaps:?}");
}

#[tokio::test]
async fn an_email_code_claims_an_account_its_owner_never_verified() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.registration_enabled": true, "auth.email_code_enabled": true } }),
    )
    .await;
    // Someone registers the owner's address with a password of their own.
    let registered = post_public(
        &app,
        "/api/auth/register",
        json!({ "email": "owner@example.com", "password": "squatter-password" }),
    )
    .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    let squatter = app.login("owner@example.com", "squatter-password").await;
    // The owner signs in with a code sent to the address.
    let mail = ask_code(&app, "owner@example.com").await;
    let owner = post_public(
        &app,
        "/api/auth/email-code/verify",
        json!({ "email": "owner@example.com", "code": emailed_code(&mail.text) }),
    )
    .await;
    assert_eq!(owner.status, StatusCode::OK, "{:?}", owner.body);
    // Whatever the squatter set is gone.
    assert_eq!(
        app.get("/api/auth/me", &squatter).await.status,
        StatusCode::UNAUTHORIZED
    );
    let password = app
        .login_answer("owner@example.com", "squatter-password")
        .await;
    assert_eq!(password.status, StatusCode::UNAUTHORIZED);
    let token = owner.data()["token"].as_str().unwrap();
    assert_eq!(app.get("/api/auth/me", token).await.status, StatusCode::OK);
}

/// Asks for a sign-in code for `email` and waits for its email.
pub(crate) async fn ask_code(app: &TestApp, email: &str) -> testkit::ReceivedEmail {
    let asked = post_public(app, "/api/auth/email-code", json!({ "email": email })).await;
    assert_eq!(asked.status, StatusCode::NO_CONTENT);
    app.smtp
        .wait_for(email, "/code?token=", std::time::Duration::from_secs(20))
        .await
}

#[tokio::test]
async fn code_verification_counts_against_the_account_rate_limit() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    app.patch(
        "/admin/api/settings",
        &admin,
        json!({ "data": { "auth.account_rate_limit_per_minute": 3 } }),
    )
    .await;
    // One window for every public account route (API.md 16).
    let calls = [
        (
            "/api/auth/mfa/verify",
            json!({ "challenge": "x", "code": "123456" }),
        ),
        ("/api/auth/email-code/verify", json!({ "token": "x" })),
        ("/api/auth/email-code", json!({ "email": "a@example.com" })),
    ];
    for (path, body) in &calls {
        let answer = post_public(&app, path, body.clone()).await;
        assert_ne!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
    }
    for (path, body) in calls {
        let answer = post_public(&app, path, body).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{path}");
        assert!(answer.headers.contains_key("retry-after"), "{path}");
    }
}
