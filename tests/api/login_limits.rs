//! Sign-in under load: hashing bounded to the hash pool's threads, the
//! per-address rate limit shared by every instance, and answers that take
//! the same time whether the email exists or not.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use testkit::{ADMIN_EMAIL, ADMIN_PASSWORD, TestApp, spawn_app, spawn_app_with};

async fn set(app: &TestApp, admin: &str, settings: serde_json::Value) {
    let answer = app
        .patch("/admin/api/settings", admin, json!({ "data": settings }))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
}

/// A sign-in sent to `base` (this app or a peer instance), from `forwarded_for` when given.
async fn sign_in(
    app: &TestApp,
    base: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> reqwest::Response {
    let mut request = app
        .client
        .post(format!("{base}/api/auth/login"))
        .json(&json!({ "email": ADMIN_EMAIL, "password": password }));
    if let Some(ip) = forwarded_for {
        request = request.header("x-forwarded-for", ip);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn more_concurrent_sign_ins_than_hashing_threads_are_all_answered() {
    let app = spawn_app().await;
    let attempts = (0..12).map(|i| {
        let app = &app;
        async move {
            let (email, password) = if i % 2 == 0 {
                (ADMIN_EMAIL, ADMIN_PASSWORD)
            } else {
                ("nobody@example.com", "wrong-password")
            };
            (i, app.login_answer(email, password).await.status)
        }
    });
    let answers = futures_util::future::join_all(attempts).await;
    for (i, status) in answers {
        let expected = if i % 2 == 0 {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        assert_eq!(status, expected, "attempt {i}");
    }
    let pool = app.services.sign_in.hash_pool();
    assert_eq!(
        pool.peak_concurrency(),
        pool.threads(),
        "hashes ran at most one per thread, and every thread was used"
    );
}

#[tokio::test]
async fn sign_ins_per_address_are_limited_across_instances() {
    let app = spawn_app().await;
    // This sign-in is the window's first attempt.
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.login_rate_limit_per_minute": 3 }),
    )
    .await;
    let peer = app.spawn_peer().await;
    assert_eq!(
        sign_in(&app, &app.address, "wrong-password", None)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        sign_in(&app, &peer, ADMIN_PASSWORD, None).await.status(),
        StatusCode::OK
    );
    for base in [&app.address, &peer] {
        let refused = sign_in(&app, base, ADMIN_PASSWORD, None).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry_after: u64 = refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=61).contains(&retry_after), "{retry_after}");
        let body = TestApp::answer(refused).await;
        assert_eq!(body.code(), "RATE_LIMIT_EXCEEDED");
    }
    // Refused attempts are not counted: the window still holds three.
    let held = app
        .db
        .sql("SELECT sum(c)::text FROM svc.rate_limits, unnest(counts) c WHERE key = 'login:127.0.0.1'")
        .await;
    assert_eq!(held.as_deref(), Some("3"));
    // 0 turns the limit off.
    set(
        &app,
        &admin,
        json!({ "auth.login_rate_limit_per_minute": 0 }),
    )
    .await;
    assert_eq!(
        sign_in(&app, &app.address, ADMIN_PASSWORD, None)
            .await
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn each_source_address_has_its_own_window() {
    let app = spawn_app_with(|config| {
        config.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.login_rate_limit_per_minute": 1 }),
    )
    .await;
    let first = Some("203.0.113.7");
    let second = Some("198.51.100.9");
    assert_eq!(
        sign_in(&app, &app.address, "wrong-password", first)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        sign_in(&app, &app.address, ADMIN_PASSWORD, first)
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        sign_in(&app, &app.address, ADMIN_PASSWORD, second)
            .await
            .status(),
        StatusCode::OK
    );
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::test]
async fn unknown_and_known_emails_take_the_same_time() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.login_rate_limit_per_minute": 0, "auth.lockout_threshold": 1000 }),
    )
    .await;
    // A systematic difference shows in every measurement; noise of the
    // machine rarely in three in a row.
    let mut gaps = Vec::new();
    for _ in 0..3 {
        let (known, unknown) = median_times(&app).await;
        let gap = known.abs_diff(unknown).as_secs_f64() / known.as_secs_f64();
        if gap < 0.10 {
            return;
        }
        gaps.push(format!(
            "known {known:?} vs unknown {unknown:?}: {:.0}% apart",
            gap * 100.0
        ));
    }
    panic!("{gaps:?}");
}

/// Median times of wrong-password sign-ins with a known and an unknown email.
async fn median_times(app: &TestApp) -> (Duration, Duration) {
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    // Interleaved, so that load from other tests weighs on both alike.
    for _ in 0..50 {
        for (email, times) in [
            (ADMIN_EMAIL, &mut known),
            ("nobody@example.com", &mut unknown),
        ] {
            let started = Instant::now();
            let answer = app.login_answer(email, "wrong-password").await;
            times.push(started.elapsed());
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        }
    }
    (median(known), median(unknown))
}

#[tokio::test]
async fn the_rate_limit_setting_defaults_to_60_and_takes_integers_from_0() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let settings = app.get("/admin/api/settings", &admin).await;
    assert_eq!(settings.data()["auth.login_rate_limit_per_minute"], 60);
    for wrong in [json!(-1), json!(1.5), json!("60"), json!(10_001)] {
        let refused = app
            .patch(
                "/admin/api/settings",
                &admin,
                json!({ "data": { "auth.login_rate_limit_per_minute": wrong } }),
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{wrong}");
        assert_eq!(refused.code(), "INVALID_PAYLOAD");
        assert_eq!(
            refused.body["errors"][0]["field"],
            "auth.login_rate_limit_per_minute"
        );
    }
}

#[tokio::test]
async fn simultaneous_wrong_passwords_never_pass_the_lockout_threshold() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    set(
        &app,
        &admin,
        json!({ "auth.login_rate_limit_per_minute": 0, "auth.lockout_threshold": 3 }),
    )
    .await;
    app.create_user(&admin, "burst@example.com", "password-123", None)
        .await;
    let peer = app.spawn_peer().await;
    let attempts = (0..16).map(|i| {
        let base = if i % 2 == 0 { &app.address } else { &peer };
        let request = app
            .client
            .post(format!("{base}/api/auth/login"))
            .json(&json!({ "email": "burst@example.com", "password": "wrong-guess" }));
        async move { request.send().await.unwrap().status() }
    });
    let answers = futures_util::future::join_all(attempts).await;
    assert!(answers.iter().all(|s| *s == StatusCode::UNAUTHORIZED));
    // Only as many passwords as the threshold allows were tried.
    let tried = app
        .db
        .sql(
            "SELECT count(*)::text FROM svc.audit_log WHERE action = 'auth.login_failed' \
             AND details->>'reason' LIKE 'wrong_password%' AND details->>'email' = 'burst@example.com'",
        )
        .await;
    assert_eq!(tried.as_deref(), Some("3"));
    let locked = app.login_answer("burst@example.com", "password-123").await;
    assert_eq!(locked.status, StatusCode::UNAUTHORIZED, "locked");
}
