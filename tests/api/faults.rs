//! Faults: PostgreSQL stopped and started under a write load.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use testkit::{Cluster, TestApp, spawn_app_with};

use crate::data::{create_table, expose};

/// What the writers saw: (status, how long the answer took, the value written).
type Answers = Arc<Mutex<Vec<(u16, Duration, i64)>>>;

/// Writes rows one after another until `stop`, noting every answer.
async fn writer(
    app: Arc<TestApp>,
    admin: String,
    first: i64,
    answers: Answers,
    stop: Arc<Mutex<bool>>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let mut n = first;
    while !*stop.lock().unwrap() {
        let started = Instant::now();
        let status = match client
            .post(format!("{}/api/data/app/events", app.address))
            .bearer_auth(&admin)
            .json(&json!({ "data": { "n": n } }))
            .send()
            .await
        {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        };
        answers.lock().unwrap().push((status, started.elapsed(), n));
        n += 1;
        if status != 201 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_stopped_database_is_503_at_once_and_every_acknowledged_write_survives() {
    let cluster = Arc::new(Cluster::start());
    let url = cluster.url("tessera_faults");
    let app = Arc::new(spawn_app_with(move |config| config.database_url = url).await);
    let admin = app.admin_session().await;
    let resource = create_table(
        &app,
        &admin,
        "app",
        "events",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "n", "dataType": "bigint", "nullable": false },
        ]),
    )
    .await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;

    let answers: Answers = Arc::default();
    let stop = Arc::new(Mutex::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            tokio::spawn(writer(
                app.clone(),
                admin.clone(),
                w * 1_000_000,
                answers.clone(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;

    let down = cluster.clone();
    tokio::task::spawn_blocking(move || down.down())
        .await
        .unwrap();
    let stopped_at = answers.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let up = cluster.clone();
    tokio::task::spawn_blocking(move || up.up()).await.unwrap();

    // Recovered without a restart: writes succeed again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let recovered = answers.lock().unwrap()[stopped_at..]
            .iter()
            .any(|(status, _, _)| *status == 201);
        if recovered {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no write succeeded after the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    *stop.lock().unwrap() = true;
    for writer in writers {
        writer.await.unwrap();
    }
    let ready = app.get("/readyz", "").await;
    assert_eq!(ready.status, StatusCode::OK);

    let answers = answers.lock().unwrap().clone();
    let unavailable: Vec<_> = answers.iter().filter(|(s, _, _)| *s == 503).collect();
    assert!(!unavailable.is_empty(), "no write met the stopped database");
    for (status, took, n) in &answers {
        assert!(
            matches!(status, 201 | 503),
            "write {n} answered {status} (never 500, never a hang)"
        );
        assert!(*took < Duration::from_secs(5), "write {n} took {took:?}");
    }
    let acknowledged: Vec<i64> = answers
        .iter()
        .filter(|(s, _, _)| *s == 201)
        .map(|(_, _, n)| *n)
        .collect();
    let mut stored_n: Vec<i64> = Vec::new();
    loop {
        let page = app
            .get(
                &format!(
                    "/api/data/app/events?limit=1000&offset={}&sort=id",
                    stored_n.len()
                ),
                &admin,
            )
            .await;
        let rows = page.data().as_array().unwrap();
        if rows.is_empty() {
            break;
        }
        stored_n.extend(rows.iter().map(|r| r["n"].as_i64().unwrap()));
    }
    assert_eq!(
        stored_n.len(),
        acknowledged.len(),
        "rows stored vs writes acknowledged"
    );
    for n in &acknowledged {
        assert!(stored_n.contains(n), "acknowledged write {n} is missing");
    }
    eprintln!(
        "faults: {} writes, {} acknowledged, {} answered 503 while the database was down, slowest answer {:?}",
        answers.len(),
        acknowledged.len(),
        unavailable.len(),
        answers.iter().map(|(_, t, _)| *t).max().unwrap_or_default()
    );
}

/// A stopping instance releases its runs and emails after the server's
/// worker threads have stopped; pooled connections those threads opened
/// fail at once then. The releases go on past them to a working one.
#[tokio::test]
async fn releases_go_past_connections_of_stopped_threads() {
    use outbox::Outbox;
    use workflows::store::WorkerStore;

    const POOL: u32 = 6;
    let db = testkit::TestDatabase::create().await;
    let options = store_pg::PoolOptions {
        max_connections: POOL,
        ..Default::default()
    };
    let conn = store_pg::connect(&db.url, options).await.unwrap();
    // Every connection of the pool opened on a runtime that then stops,
    // as an actix worker's does.
    let pool = conn.get_postgres_connection_pool().clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let held = futures_util::future::join_all((0..POOL).map(|_| pool.acquire())).await;
            assert!(held.iter().all(Result::is_ok));
            drop(held);
            // The connections go back to the pool, idle, before the runtime ends.
            tokio::time::sleep(Duration::from_millis(200)).await;
        });
    })
    .join()
    .unwrap();
    let store = store_pg::PgStore::new(conn, Arc::new(kernel::SystemClock));
    let released = store.release_leases(uuid::Uuid::new_v4()).await;
    assert!(matches!(released, Ok(0)), "{released:?}");
    let emails = store.release(&[uuid::Uuid::new_v4()]).await;
    assert!(emails.is_ok(), "{emails:?}");
    db.destroy().await;
}
