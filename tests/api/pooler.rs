//! Behind PgBouncer in transaction mode (Debian's 1.18: no prepared
//! statements of its own), whatever `TESSERA_TEST_POOLER` says: the
//! statement timeout still stops a slow statement and leaves nothing on the
//! pooler's server connections, a CSV import's COPY and temporary table
//! work, realtime delivers without NOTIFY, and migrations need the direct
//! URL the docs name. (`cargo xtask test` runs the Data API, auth, token,
//! workflow, realtime, CSV and two-instance tests through the pooler too.)

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use testkit::{PgBouncer, TestApp, spawn_app_through_pooler};

use crate::csv::import_into;
use crate::realtime::{Stream, insert, notes};
use crate::rpc::{call, registered, sql};

/// `statement_timeout` as a fresh session through `app`'s pooler sees it
/// (the simple protocol: nothing prepared through the pooler).
async fn pooled_timeout(app: &TestApp) -> String {
    use sea_orm::sqlx::{self, Connection as _, Row as _};
    let pooler = app.pooler.as_ref().expect("through the pooler");
    let options: sqlx::postgres::PgConnectOptions = pooler.url_for(&app.db.url).parse().unwrap();
    let mut connection = sqlx::PgConnection::connect_with(&options.extra_float_digits(None))
        .await
        .unwrap();
    let row = sqlx::raw_sql("SHOW statement_timeout")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let shown: String = row.try_get(0).unwrap();
    connection.close().await.unwrap();
    shown
}

#[tokio::test]
async fn a_slow_statement_stops_at_the_timeout_and_no_session_keeps_it() {
    let app = spawn_app_through_pooler().await;
    let admin = app.admin_session().await;
    sql(
        &app,
        &[
            "CREATE SCHEMA shop",
            "CREATE FUNCTION shop.nap(ms integer) RETURNS integer LANGUAGE sql STABLE AS \
             'SELECT ms FROM pg_sleep(ms / 1000.0)'",
        ],
    )
    .await;
    registered(&app, &admin, "nap", &["POST"]).await;
    // Control: a short call answers.
    let short = call(&app, &admin, "nap", json!({ "ms": 10 })).await;
    assert_eq!(short.body, json!({ "data": 10 }), "{:?}", short.body);
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.statement_timeout_ms": 300 } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    let started = Instant::now();
    let slow = call(&app, &admin, "nap", json!({ "ms": 3000 })).await;
    assert_eq!(slow.status, StatusCode::BAD_REQUEST, "{:?}", slow.body);
    assert_eq!(slow.code(), "QUERY_TIMEOUT");
    assert!(started.elapsed() < Duration::from_secs(2));
    // The timeout was the transaction's: the pooler's server connections
    // keep none of it, and the next calls answer.
    assert_eq!(pooled_timeout(&app).await, "0");
    for _ in 0..3 {
        let again = call(&app, &admin, "nap", json!({ "ms": 10 })).await;
        assert_eq!(again.body, json!({ "data": 10 }), "{:?}", again.body);
    }
}

#[tokio::test]
async fn a_csv_import_stages_its_rows_with_copy_through_the_pooler() {
    let app = spawn_app_through_pooler().await;
    let admin = app.admin_session().await;
    let resource = crate::data::keyed_table(
        &app,
        &admin,
        "items",
        json!([
            { "name": "name", "dataType": "text", "nullable": false },
            { "name": "qty", "dataType": "integer" },
        ]),
        &["GET", "POST"],
    )
    .await;
    assert!(!resource.is_empty());
    let csv: String = std::iter::once("name,qty\n".to_owned())
        .chain((0..5000).map(|i| format!("item {i},{i}\n")))
        .collect();
    let imported = import_into(&app, &admin, "app/items", csv).await;
    assert!(imported.status.is_success(), "{:?}", imported.body);
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM app.items")
            .await
            .as_deref(),
        Some("5000")
    );
    // A refused row rolls the whole import back, temporary table and all.
    let refused = import_into(&app, &admin, "app/items", "name,qty\nfine,1\nbad,many\n").await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(
        app.db
            .sql("SELECT count(*)::text FROM app.items")
            .await
            .as_deref(),
        Some("5000")
    );
}

#[tokio::test]
async fn realtime_delivers_a_change_within_two_seconds_without_notify() {
    let app = spawn_app_through_pooler().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    for title in ["first", "second"] {
        let written = Instant::now();
        let id = insert(&app, &admin, &owner, title).await;
        let event = stream
            .next_within(Duration::from_secs(2))
            .await
            .expect("an event within 2 s");
        assert_eq!(event.data["row"]["id"], id);
        assert!(written.elapsed() < Duration::from_secs(2));
    }
}

#[tokio::test]
async fn migrate_runs_on_the_direct_url_the_docs_name() {
    let db = testkit::TestDatabase::empty().await;
    let url = url::Url::parse(&db.url).unwrap();
    let pooler = PgBouncer::start(url.host_str().unwrap(), url.port().unwrap_or(5432), 4);
    let through = pooler.url_for(&db.url);
    let migrate = |env: Vec<(&'static str, String)>| {
        let through = through.clone();
        async move {
            tokio::process::Command::new(crate::binary::binary())
                .arg("migrate")
                .env("TESSERA_DATABASE_URL", through)
                .env("TESSERA_DATABASE_POOLER", "transaction")
                .envs(env)
                .output()
                .await
                .unwrap()
        }
    };
    // Without the direct URL: refused, naming the setting, nothing done.
    let refused = migrate(Vec::new()).await;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("TESSERA_DATABASE_MIGRATE_URL"), "{said}");
    assert_eq!(
        db.sql("SELECT count(*)::text FROM pg_namespace WHERE nspname = 'svc'")
            .await
            .as_deref(),
        Some("0")
    );
    let done = migrate(vec![("TESSERA_DATABASE_MIGRATE_URL", db.url.clone())]).await;
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(
        db.sql("SELECT count(*)::text FROM pg_namespace WHERE nspname = 'svc'")
            .await
            .as_deref(),
        Some("1")
    );
}
