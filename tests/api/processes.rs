//! Real `tessera serve` processes killed, stalled and run side by side on
//! one database (issue 15): nothing acknowledged is lost, no run stays
//! RUNNING, every queued email leaves, and two processes act as one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};
use testkit::{SmtpSink, TestDatabase};
use tokio::process::Child;

use crate::binary::Served;

use crate::binary::serve_with;

/// One JSON request; answers the status and the body (`null` when empty).
async fn send(
    client: &Client,
    method: Method,
    url: String,
    bearer: Option<&str>,
    body: Option<Value>,
) -> reqwest::Result<(StatusCode, Value)> {
    let mut request = client.request(method, url);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// [`send`] that must answer `expected`; answers the body's `data`.
async fn expect(
    client: &Client,
    method: Method,
    url: String,
    bearer: &str,
    body: Option<Value>,
    expected: StatusCode,
) -> Value {
    let (status, answer) = send(client, method, url.clone(), Some(bearer), body)
        .await
        .unwrap();
    assert_eq!(status, expected, "{url}: {answer}");
    answer["data"].clone()
}

/// The bootstrap administrator's session on `base`.
async fn sign_in(client: &Client, base: &str) -> String {
    let body = json!({ "email": "boot@example.com", "password": "boot-password-1" });
    let (status, answer) = send(
        client,
        Method::POST,
        format!("{base}/api/auth/login"),
        None,
        Some(body),
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["data"]["token"].as_str().unwrap().to_owned()
}

/// Creates `app.notes (id identity, title)`, exposed for reads and writes;
/// answers its resource id.
async fn notes_table(client: &Client, base: &str, admin: &str) -> String {
    let columns = json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
        { "name": "title", "dataType": "text" }
    ]);
    let table = expect(
        client,
        Method::POST,
        format!("{base}/admin/api/schema/app/tables"),
        admin,
        Some(json!({ "data": { "name": "notes", "columns": columns } })),
        StatusCode::CREATED,
    )
    .await;
    let resource = table["resourceId"].as_str().unwrap().to_owned();
    expect(
        client,
        Method::PATCH,
        format!("{base}/admin/api/resources/{resource}"),
        admin,
        Some(json!({ "data": { "exposedMethods": ["GET", "POST"] } })),
        StatusCode::OK,
    )
    .await;
    resource
}

/// Creates and publishes a workflow; answers its id.
async fn workflow(
    client: &Client,
    base: &str,
    admin: &str,
    slug: &str,
    trigger: Value,
    steps: Value,
) -> String {
    let created = expect(
        client,
        Method::POST,
        format!("{base}/admin/api/workflows"),
        admin,
        Some(json!({ "data": { "slug": slug, "trigger": trigger, "steps": steps } })),
        StatusCode::CREATED,
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    expect(
        client,
        Method::POST,
        format!("{base}/admin/api/workflows/{id}/publish"),
        admin,
        None,
        StatusCode::OK,
    )
    .await;
    id
}

/// The bootstrap administrator's session on `base` and user id.
async fn administrator(client: &Client, base: &str) -> (String, String) {
    let admin = sign_in(client, base).await;
    let me = expect(
        client,
        Method::GET,
        format!("{base}/api/auth/me"),
        &admin,
        None,
        StatusCode::OK,
    )
    .await;
    let id = me["id"].as_str().unwrap().to_owned();
    (admin, id)
}

/// Polls `sql` (answering a count) until it is `0`, for at most `limit`.
async fn until_zero(db: &TestDatabase, sql: &str, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left = db.sql(sql).await;
        if left.as_deref() == Some("0") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{sql} still {left:?} after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many emails each address received.
fn received(sink: &SmtpSink) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for email in sink.emails() {
        for to in email.to {
            *counts.entry(to.to_ascii_lowercase()).or_default() += 1;
        }
    }
    counts
}

/// Sends `signal` (`STOP`, `CONT`) to a child process.
fn signal(child: &Child, signal: &str) {
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Short leases, so that another process takes over within a second.
fn quick_leases(smtp: &str) -> [(&'static str, String); 3] {
    [
        ("TESSERA_WORKFLOW_LEASE_SECONDS", "1".to_owned()),
        ("TESSERA_OUTBOX_LEASE_SECONDS", "1".to_owned()),
        ("TESSERA_SMTP_URL", smtp.to_owned()),
    ]
}

async fn serve(db: &TestDatabase, env: &[(&'static str, String)]) -> (Served, String) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    serve_with(&db.url, &env).await
}

/// What the burst's clients were told before the kill.
#[derive(Default)]
struct Acknowledged {
    notes: Vec<i64>,
    runs: Vec<String>,
    invited: Vec<String>,
}

/// One kind of request of a burst: a POST to `url` expecting `expected`.
#[derive(Clone)]
struct Load {
    url: String,
    bearer: Option<String>,
    expected: StatusCode,
    /// The body of the `i`-th request.
    body: fn(usize) -> Value,
    /// Keeps what the `i`-th answer acknowledged.
    keep: fn(&mut Acknowledged, usize, &Value),
}

/// Sends `load` until the server stops answering.
async fn repeat(client: Client, load: Load, acknowledged: Arc<Mutex<Acknowledged>>) {
    for i in 0.. {
        let body = (load.body)(i);
        match send(
            &client,
            Method::POST,
            load.url.clone(),
            load.bearer.as_deref(),
            Some(body),
        )
        .await
        {
            Ok((status, answer)) if status == load.expected => {
                (load.keep)(&mut acknowledged.lock().unwrap(), i, &answer);
            }
            Ok((status, answer)) => panic!("{} answered {status}: {answer}", load.url),
            Err(_) => return,
        }
    }
}

#[tokio::test]
async fn kill_9_under_load_loses_nothing_that_was_acknowledged() {
    let db = TestDatabase::create().await;
    let sink = SmtpSink::start().await;
    let env = quick_leases(&sink.url());
    let (mut first, base) = serve(&db, &env).await;
    let client = Client::new();
    let (admin, admin_id) = administrator(&client, &base).await;
    let notes = notes_table(&client, &base, &admin).await;
    let on_note = workflow(
        &client,
        &base,
        &admin,
        "on-note",
        json!({ "type": "dbEvent", "resourceId": notes, "events": ["insert"] }),
        json!([{ "id": "wait", "type": "delay", "ms": 200 }, { "id": "done", "type": "finish", "result": "{{start.data.new.id}}" }]),
    )
    .await;
    workflow(
        &client,
        &base,
        &admin,
        "slow",
        json!({ "type": "webhook", "access": "public", "executeAs": admin_id }),
        json!([{ "id": "wait", "type": "delay", "ms": 300 }, { "id": "done", "type": "finish", "result": "slept" }]),
    )
    .await;

    let acknowledged = Arc::new(Mutex::new(Acknowledged::default()));
    let write = Load {
        url: format!("{base}/api/data/app/notes"),
        bearer: Some(admin.clone()),
        expected: StatusCode::CREATED,
        body: |i| json!({ "data": { "title": format!("#{i}") } }),
        keep: |acked, _, answer| acked.notes.push(answer["data"]["id"].as_i64().unwrap()),
    };
    let call = Load {
        url: format!("{base}/api/workflows/slow/webhook"),
        bearer: None,
        expected: StatusCode::OK,
        body: |_| json!({}),
        keep: |acked, _, answer| {
            assert_eq!(answer["data"]["result"], "slept", "{answer}");
            acked
                .runs
                .push(answer["data"]["id"].as_str().unwrap().to_owned());
        },
    };
    let invite = Load {
        url: format!("{base}/admin/api/invitations"),
        bearer: Some(admin.clone()),
        expected: StatusCode::CREATED,
        body: |i| json!({ "data": { "email": format!("guest{i}@example.com"), "roleIds": [] } }),
        keep: |acked, i, _| acked.invited.push(format!("guest{i}@example.com")),
    };
    let mut burst = tokio::task::JoinSet::new();
    for load in [&write, &write, &write, &write, &call, &call, &invite] {
        burst.spawn(repeat(client.clone(), load.clone(), acknowledged.clone()));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.kill().await.unwrap();
    while let Some(ended) = burst.join_next().await {
        ended.unwrap();
    }

    let (_second, _) = serve(&db, &env).await;
    let limit = Duration::from_secs(30);
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE status = 'RUNNING'",
        limit,
    )
    .await;
    until_zero(&db, "SELECT count(*)::text FROM svc.row_events", limit).await;
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.email_outbox WHERE sent_at IS NULL",
        limit,
    )
    .await;

    let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());
    assert!(
        acknowledged.notes.len() > 20,
        "too few writes: {}",
        acknowledged.notes.len()
    );
    assert!(!acknowledged.runs.is_empty() && !acknowledged.invited.is_empty());
    let ids: Vec<String> = acknowledged.notes.iter().map(i64::to_string).collect();
    let stored = db
        .sql(&format!(
            "SELECT count(*)::text FROM app.notes WHERE id IN ({})",
            ids.join(",")
        ))
        .await;
    assert_eq!(
        stored,
        Some(ids.len().to_string()),
        "an acknowledged write is missing"
    );
    // Every stored row (acknowledged or committed just before the kill)
    // started exactly one run, and every run succeeded.
    let rows = db.sql("SELECT count(*)::text FROM app.notes").await;
    let runs = db
        .sql(&format!(
            "SELECT count(*)::text FROM svc.workflow_runs WHERE workflow_id = '{on_note}'"
        ))
        .await;
    assert_eq!(runs, rows, "row events and runs differ");
    assert_eq!(
        db.sql("SELECT count(*)::text FROM svc.workflow_runs WHERE status <> 'SUCCEEDED'")
            .await,
        Some("0".into())
    );
    for run in &acknowledged.runs {
        assert_eq!(
            db.sql(&format!(
                "SELECT status FROM svc.workflow_runs WHERE id = '{run}'"
            ))
            .await
            .as_deref(),
            Some("SUCCEEDED"),
            "acknowledged run {run}"
        );
    }
    // Every acknowledged invitation left at least once; a mail sent just
    // before the kill and not yet marked sent leaves twice.
    let counts = received(&sink);
    for email in &acknowledged.invited {
        assert!(
            counts.get(email).is_some_and(|n| *n >= 1),
            "{email} never sent"
        );
    }
    let duplicates: usize = counts.values().map(|n| n - 1).sum();
    eprintln!(
        "kill -9: {} writes, {} sync runs, {} invitations acknowledged; {} rows, {} event runs; {} emails sent twice",
        acknowledged.notes.len(),
        acknowledged.runs.len(),
        acknowledged.invited.len(),
        rows.unwrap_or_default(),
        runs.unwrap_or_default(),
        duplicates
    );
    db.destroy().await;
}

#[tokio::test]
async fn a_sync_webhook_answers_when_another_process_finished_its_run() {
    let db = TestDatabase::create().await;
    let sink = SmtpSink::start().await;
    let env = quick_leases(&sink.url());
    let (first, a) = serve(&db, &env).await;
    let (_second, _) = serve(&db, &env).await;
    let client = Client::new();
    let (admin, admin_id) = administrator(&client, &a).await;
    workflow(
        &client,
        &a,
        &admin,
        "long",
        json!({ "type": "webhook", "access": "public", "executeAs": admin_id, "waitSeconds": 25 }),
        json!([{ "id": "wait", "type": "delay", "ms": 2000 }, { "id": "done", "type": "finish", "result": "finished elsewhere" }]),
    )
    .await;
    let call = tokio::spawn({
        let client = client.clone();
        async move {
            send(
                &client,
                Method::POST,
                format!("{a}/api/workflows/long/webhook"),
                None,
                Some(json!({})),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The first process stalls; the second takes the run over once the
    // lease ends and finishes it.
    signal(&first, "STOP");
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE status <> 'SUCCEEDED' OR attempts < 2",
        Duration::from_secs(15),
    )
    .await;
    signal(&first, "CONT");
    let (status, answer) = call.await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["data"]["result"], "finished elsewhere");
    db.destroy().await;
}

#[tokio::test]
async fn two_processes_share_revocations_emails_and_row_events() {
    let db = TestDatabase::create().await;
    let sink = SmtpSink::start().await;
    let env = [("TESSERA_SMTP_URL", sink.url())];
    let (_first, a) = serve(&db, &env).await;
    let (_second, b) = serve(&db, &env).await;
    let client = Client::new();
    let admin = sign_in(&client, &a).await;

    // A session ended on one process is refused by the other at once.
    let session = sign_in(&client, &a).await;
    expect(
        &client,
        Method::GET,
        format!("{b}/api/auth/me"),
        &session,
        None,
        StatusCode::OK,
    )
    .await;
    expect(
        &client,
        Method::POST,
        format!("{a}/api/auth/logout"),
        &session,
        None,
        StatusCode::NO_CONTENT,
    )
    .await;
    expect(
        &client,
        Method::GET,
        format!("{b}/api/auth/me"),
        &session,
        None,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    // So is a token revoked on one.
    let token = expect(
        &client,
        Method::POST,
        format!("{a}/api/auth/tokens"),
        &admin,
        Some(json!({ "name": "ci", "lifetimeDays": 1, "plane": "ADMIN" })),
        StatusCode::CREATED,
    )
    .await;
    let (id, secret) = (
        token["id"].as_str().unwrap(),
        token["token"].as_str().unwrap(),
    );
    expect(
        &client,
        Method::GET,
        format!("{b}/admin/api/settings"),
        secret,
        None,
        StatusCode::OK,
    )
    .await;
    expect(
        &client,
        Method::DELETE,
        format!("{a}/api/auth/tokens/{id}"),
        &admin,
        None,
        StatusCode::NO_CONTENT,
    )
    .await;
    expect(
        &client,
        Method::GET,
        format!("{b}/admin/api/settings"),
        secret,
        None,
        StatusCode::UNAUTHORIZED,
    )
    .await;

    // Row events written through both processes: one run each.
    let notes = notes_table(&client, &a, &admin).await;
    let on_note = workflow(
        &client,
        &a,
        &admin,
        "on-note",
        json!({ "type": "dbEvent", "resourceId": notes, "events": ["insert"] }),
        json!([{ "id": "done", "type": "finish", "result": "{{start.data.new.id}}" }]),
    )
    .await;
    const EACH: usize = 40;
    for i in 0..EACH {
        let base = if i % 2 == 0 { &a } else { &b };
        let body = json!({ "data": { "title": format!("n{i}") } });
        expect(
            &client,
            Method::POST,
            format!("{base}/api/data/app/notes"),
            &admin,
            Some(body),
            StatusCode::CREATED,
        )
        .await;
        let invite = json!({ "data": { "email": format!("guest{i}@example.com"), "roleIds": [] } });
        expect(
            &client,
            Method::POST,
            format!("{base}/admin/api/invitations"),
            &admin,
            Some(invite),
            StatusCode::CREATED,
        )
        .await;
    }
    let limit = Duration::from_secs(30);
    until_zero(&db, "SELECT count(*)::text FROM svc.row_events", limit).await;
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE status = 'RUNNING'",
        limit,
    )
    .await;
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.email_outbox WHERE sent_at IS NULL",
        limit,
    )
    .await;
    let runs = db
        .sql(&format!(
            "SELECT count(DISTINCT result::text)::text || '/' || count(*)::text FROM svc.workflow_runs WHERE workflow_id = '{on_note}'"
        ))
        .await;
    assert_eq!(runs, Some(format!("{EACH}/{EACH}")), "distinct rows / runs");
    // Both processes send from the one outbox: each email exactly once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counts = received(&sink);
    for i in 0..EACH {
        assert_eq!(
            counts.get(&format!("guest{i}@example.com")),
            Some(&1),
            "guest{i}"
        );
    }
    db.destroy().await;
}

/// SIGTERM while a run is going: the process releases it, so another
/// process takes it over at once, not when its lease ends, even when the
/// pool holds connections of the stopped worker threads.
#[tokio::test]
async fn a_stopped_process_hands_its_runs_over_at_once() {
    let db = TestDatabase::create().await;
    // The lease stays at its 30 s default: only the release makes the
    // other process take the run over within seconds.
    let (mut first, a) = serve(&db, &[("TESSERA_SHUTDOWN_GRACE_SECONDS", "1".into())]).await;
    let (_second, _) = serve(&db, &[]).await;
    let client = Client::new();
    let (admin, admin_id) = administrator(&client, &a).await;
    workflow(
        &client,
        &a,
        &admin,
        "long",
        json!({ "type": "webhook", "access": "public", "response": "async", "executeAs": admin_id }),
        json!([{ "id": "wait", "type": "delay", "ms": 4000 }, { "id": "done", "type": "finish", "result": "handed over" }]),
    )
    .await;
    let (status, answer) = send(
        &client,
        Method::POST,
        format!("{a}/api/workflows/long/webhook"),
        None,
        Some(json!({})),
    )
    .await
    .unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    // Requests fill the pool with connections the server's worker threads
    // opened; those threads are gone when the process releases its runs.
    let burst = (0..64).map(|_| {
        send(
            &client,
            Method::GET,
            format!("{a}/admin/api/roles"),
            Some(&admin),
            None,
        )
    });
    for answer in futures_util::future::join_all(burst).await {
        assert_eq!(answer.unwrap().0, StatusCode::OK);
    }
    let stopping = tokio::time::Instant::now();
    signal(&first, "TERM");
    let exited = tokio::time::timeout(Duration::from_secs(10), first.wait())
        .await
        .expect("the process stops within its grace")
        .unwrap();
    assert!(exited.success(), "{exited:?}");
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE status <> 'SUCCEEDED'",
        Duration::from_secs(15),
    )
    .await;
    assert!(stopping.elapsed() < Duration::from_secs(15));
    assert_eq!(
        db.sql("SELECT result::text || ' ' || attempts FROM svc.workflow_runs")
            .await,
        Some("\"handed over\" 2".into())
    );
    db.destroy().await;
}

/// SIGTERM while a batch of emails is being sent: the process finishes the
/// one it is sending and hands the rest of its claim back, so another
/// process sends them at once, not when the 60 s lease ends; none twice.
#[tokio::test]
async fn a_stopped_process_hands_its_claimed_emails_over_at_once() {
    let db = TestDatabase::create().await;
    db.sql(
        "INSERT INTO svc.email_outbox (id, to_address, kind, subject, body_text, body_html) \
         SELECT gen_random_uuid(), 'person' || n || '@example.com', 'test', 'Hello ' || n, 'text', '<p>html</p>' \
         FROM generate_series(1, 10) AS n",
    )
    .await;
    // Each email takes the first sink 300 ms: the whole claim of ten is
    // still being sent when the process is told to stop.
    let slow = SmtpSink::start_slow(Duration::from_millis(300)).await;
    // Its log kept: it tells what became of the claimed emails.
    let url = slow.url();
    let (mut first, _, first_log) =
        crate::binary::serve_logged(&db.url, &[("TESSERA_SMTP_URL", url.as_str())]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while slow.emails().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no email left the first process"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopping = tokio::time::Instant::now();
    signal(&first, "TERM");
    let exited = tokio::time::timeout(Duration::from_secs(10), first.wait())
        .await
        .expect("the process stops")
        .unwrap();
    assert!(exited.success(), "{exited:?}");
    let sent_before = slow.emails().len();
    assert!(
        sent_before < 10,
        "the first process sent everything before stopping"
    );

    let fast = SmtpSink::start().await;
    let (_second, _) = serve(&db, &[("TESSERA_SMTP_URL", fast.url())]).await;
    let unsent = "SELECT count(*)::text FROM svc.email_outbox WHERE sent_at IS NULL";
    let handed_over = tokio::time::timeout(
        Duration::from_secs(10),
        until_zero(&db, unsent, Duration::from_secs(3600)),
    );
    assert!(
        handed_over.await.is_ok(),
        "{unsent} not 0 after 10 s; the first process logged:\n{}",
        first_log.lock().unwrap()
    );
    assert!(stopping.elapsed() < Duration::from_secs(20));
    let mut recipients: Vec<String> = slow
        .emails()
        .into_iter()
        .chain(fast.emails())
        .flat_map(|email| email.to)
        .collect();
    recipients.sort();
    let before = recipients.len();
    recipients.dedup();
    assert_eq!(before, recipients.len(), "an email was sent twice");
    assert_eq!(recipients.len(), 10);
    assert_eq!(
        db.sql("SELECT max(attempts)::text FROM svc.email_outbox")
            .await,
        Some("1".into())
    );
    db.destroy().await;
}

/// Realtime across processes: a row written through one process reaches a
/// subscriber of the other, with the same event id a subscriber of the
/// first gets.
#[tokio::test]
async fn a_write_through_one_process_reaches_subscribers_of_the_other() {
    let db = TestDatabase::create().await;
    let (_first, a) = serve(&db, &[]).await;
    let (_second, b) = serve(&db, &[]).await;
    let client = Client::new();
    let (admin, admin_id) = administrator(&client, &a).await;
    let table = expect(
        &client,
        Method::POST,
        format!("{a}/admin/api/schema/app/tables"),
        &admin,
        Some(json!({ "data": { "name": "notes", "columns": [
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "owner_id", "dataType": "uuid", "nullable": false },
            { "name": "title", "dataType": "text", "nullable": false } ] } })),
        StatusCode::CREATED,
    )
    .await;
    let resource = table["resourceId"].as_str().unwrap();
    expect(
        &client,
        Method::PATCH,
        format!("{a}/admin/api/resources/{resource}"),
        &admin,
        Some(json!({ "data": { "exposedMethods": ["GET", "POST"] } })),
        StatusCode::OK,
    )
    .await;
    let follow = "subscribe=app.notes";
    let mut on_b = crate::realtime::Stream::open(&b, follow, Some(&admin), None)
        .await
        .unwrap();
    let mut on_a = crate::realtime::Stream::open(&a, follow, Some(&admin), None)
        .await
        .unwrap();
    let row = expect(
        &client,
        Method::POST,
        format!("{a}/api/data/app/notes"),
        &admin,
        Some(json!({ "data": { "owner_id": admin_id, "title": "through a" } })),
        StatusCode::CREATED,
    )
    .await;
    let (seen_on_b, seen_on_a) = (on_b.next().await, on_a.next().await);
    assert_eq!(seen_on_b.data["row"]["id"], row["id"]);
    assert_eq!(seen_on_b.data["row"]["title"], "through a");
    assert_eq!(seen_on_b.id, seen_on_a.id);
    db.destroy().await;
}

/// Two processes on one database, a schedule ticking every second: each
/// tick starts one run, none twice, none skipped while both run.
#[tokio::test]
async fn two_processes_run_each_schedule_tick_once() {
    let db = TestDatabase::create().await;
    let (_first, a) = serve(&db, &[]).await;
    let (_second, _) = serve(&db, &[]).await;
    let client = Client::new();
    let (admin, admin_id) = administrator(&client, &a).await;
    let id = workflow(
        &client,
        &a,
        &admin,
        "tick",
        json!({ "type": "schedule", "cron": "* * * * * *", "executeAs": admin_id }),
        json!([{ "id": "f", "type": "finish", "result": "{{start.data.scheduledAt}}" }]),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    expect(
        &client,
        Method::PATCH,
        format!("{a}/admin/api/workflows/{id}"),
        &admin,
        Some(json!({ "data": { "enabled": false } })),
        StatusCode::OK,
    )
    .await;
    let counts = db
        .sql(
            "SELECT count(*) || ' ' || count(DISTINCT scheduled_at) || ' ' || \
             (extract(epoch FROM max(scheduled_at) - min(scheduled_at))::int + 1) \
             FROM svc.workflow_runs",
        )
        .await
        .unwrap();
    let [runs, distinct, span]: [i64; 3] = counts
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    assert!(runs >= 4, "{counts}");
    assert_eq!(runs, distinct, "no tick twice: {counts}");
    assert_eq!(runs, span, "no tick skipped: {counts}");
    db.destroy().await;
}

/// kill -9 while a retry waits its backoff: the process that takes the run
/// over makes the next attempt once, after the backoff, and never repeats
/// the attempt that had finished.
#[tokio::test]
async fn a_retry_backoff_survives_kill_9() {
    let db = TestDatabase::create().await;
    let leases = [("TESSERA_WORKFLOW_LEASE_SECONDS", "1".to_owned())];
    let (mut first, a) = serve(&db, &leases).await;
    let client = Client::new();
    let (admin, _) = administrator(&client, &a).await;
    expect(
        &client,
        Method::PATCH,
        format!("{a}/admin/api/settings"),
        &admin,
        Some(json!({ "data": { "workflows.http_allow_private": true } })),
        StatusCode::OK,
    )
    .await;
    let (target, seen) = crate::workflow_constructs::flaky(1).await;
    let id = workflow(
        &client,
        &a,
        &admin,
        "flaky-partner",
        json!({ "type": "manual" }),
        json!([
            { "id": "call", "type": "http", "url": format!("{target}/x"),
              "retry": { "attempts": 3, "backoffMs": 4000 } },
            { "id": "done", "type": "finish", "result": "{{steps.call.result.body}}" }
        ]),
    )
    .await;
    expect(
        &client,
        Method::POST,
        format!("{a}/admin/api/workflows/{id}/run"),
        &admin,
        Some(json!({ "data": { "input": {} } })),
        StatusCode::ACCEPTED,
    )
    .await;
    // The first attempt failed and its record is stored: kill during the wait.
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE steps -> 0 -> 'attempts' IS NULL",
        Duration::from_secs(10),
    )
    .await;
    first.kill().await.unwrap();
    let (_second, _) = serve(&db, &leases).await;
    until_zero(
        &db,
        "SELECT count(*)::text FROM svc.workflow_runs WHERE status <> 'SUCCEEDED'",
        Duration::from_secs(20),
    )
    .await;
    let at = seen.lock().unwrap().clone();
    assert_eq!(
        at.len(),
        2,
        "one failed attempt, then one after the backoff"
    );
    assert!(
        at[1] - at[0] >= Duration::from_millis(4000),
        "{:?}",
        at[1] - at[0]
    );
    assert_eq!(
        db.sql("SELECT result::text || ' ' || jsonb_array_length(steps -> 0 -> 'attempts') FROM svc.workflow_runs")
            .await,
        Some("{\"n\": 2} 2".into())
    );
    db.destroy().await;
}
