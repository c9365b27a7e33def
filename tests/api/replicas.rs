//! Reads served by a streaming replica (docs/operations.md, "Read
//! replicas"): a cluster of the test's own with a `pg_basebackup` replica.
//! Replay is paused with `pg_wal_replay_pause()` to tell who answered: a
//! row written on the primary behind the replica's back is missing from
//! what the replica answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::{Cluster, PgBouncer, TestApp, spawn_app_with};

use crate::binary::serve_with;
use crate::data::{create_role, create_table, expose, grant, member};

const DATABASE: &str = "tessera_replicas";
const TOKEN: &str = "Tessera-Consistency-Token";

/// An instance over a primary with one replica, table `app.notes`
/// (`id`, `body`) readable and writable by role `Writers`.
struct Setup {
    app: TestApp,
    admin: String,
    primary: Arc<Cluster>,
    replica: Arc<Cluster>,
    /// The primary's and the replica's own PgBouncer, when the tests run
    /// through one.
    _poolers: Option<(PgBouncer, PgBouncer)>,
    role: String,
    resource: String,
    grant: String,
}

async fn setup(max_lag_ms: u64) -> Setup {
    let primary = Arc::new(Cluster::start());
    let replica = Arc::new(primary.replica());
    let (url, read_url) = (primary.url(DATABASE), replica.url(DATABASE));
    // Each behind a PgBouncer of its own when the tests run through one.
    let poolers = testkit::through_pooler().then(|| (pooler_of(&url), pooler_of(&read_url)));
    let (through, read_through) = match &poolers {
        Some((first, second)) => (first.url_for(&url), second.url_for(&read_url)),
        None => (url.clone(), read_url.clone()),
    };
    let app = spawn_app_with(move |config| {
        config.database_migrate_url = Some(url);
        config.database_url = through;
        config.database_read_urls = vec![read_through];
    })
    .await;
    let admin = app.admin_session().await;
    let settings = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "data.replica_max_lag_ms": max_lag_ms } }),
        )
        .await;
    assert_eq!(settings.status, StatusCode::OK, "{:?}", settings.body);
    let resource = create_table(
        &app,
        &admin,
        "app",
        "notes",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "body", "dataType": "text", "nullable": false },
        ]),
    )
    .await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;
    let role = create_role(&app, &admin, "Writers").await;
    let grant = grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    crate::data::grant(
        &app,
        &admin,
        &role,
        &resource,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    Setup {
        app,
        admin,
        primary,
        replica,
        _poolers: poolers,
        role,
        resource,
        grant,
    }
}

/// A PgBouncer in front of the server of `url`.
fn pooler_of(url: &str) -> PgBouncer {
    let url = url::Url::parse(url).unwrap();
    PgBouncer::start(url.host_str().unwrap(), url.port().unwrap(), 16)
}

impl Setup {
    /// The bodies of the notes `bearer` reads, and the answer's status.
    async fn bodies(&self, bearer: &str, token: Option<&str>) -> (StatusCode, Vec<String>) {
        self.bodies_at(&self.app.address, bearer, token).await
    }

    /// [`Setup::bodies`] as the instance at `base` answers.
    async fn bodies_at(
        &self,
        base: &str,
        bearer: &str,
        token: Option<&str>,
    ) -> (StatusCode, Vec<String>) {
        let mut request = self
            .app
            .client
            .get(format!("{base}/api/data/app/notes?sort=id"))
            .bearer_auth(bearer);
        if let Some(token) = token {
            request = request.header(TOKEN, token);
        }
        let answer = TestApp::answer(request.send().await.unwrap()).await;
        let bodies = answer.body["data"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| r["body"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        (answer.status, bodies)
    }

    /// Writes a note as `bearer` through the API; answers its consistency token.
    async fn write(&self, bearer: &str, body: &str) -> String {
        let answer = self
            .app
            .post(
                "/api/data/app/notes",
                bearer,
                json!({ "data": { "body": body } }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        answer.headers[TOKEN].to_str().unwrap().to_owned()
    }

    /// Writes a note on the primary behind the service's back.
    async fn behind_the_back(&self, body: &str) {
        self.primary
            .sql(
                DATABASE,
                &format!("INSERT INTO app.notes (body) VALUES ('{body}') RETURNING body"),
            )
            .await;
    }

    async fn replay(&self, on: bool) {
        let call = if on {
            "SELECT pg_wal_replay_resume()::text"
        } else {
            "SELECT pg_wal_replay_pause()::text"
        };
        self.replica.sql(DATABASE, call).await;
    }

    /// Waits until the replica has replayed everything the primary wrote.
    async fn caught_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let target = self
            .primary
            .sql(DATABASE, "SELECT pg_current_wal_lsn()::text")
            .await
            .unwrap();
        loop {
            let behind = self
                .replica
                .sql(
                    DATABASE,
                    &format!("SELECT (pg_last_wal_replay_lsn() < '{target}')::text"),
                )
                .await;
            if behind.as_deref() == Some("false") {
                return;
            }
            assert!(Instant::now() < deadline, "the replica never caught up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether `bearer`'s list is answered by the replica: with replay
    /// paused, a note written on the primary is missing from it. Replay
    /// resumes after.
    async fn served_by_replica(&self, bearer: &str, marker: &str) -> bool {
        self.caught_up().await;
        self.replay(false).await;
        self.behind_the_back(marker).await;
        let (status, bodies) = self.bodies(bearer, None).await;
        self.replay(true).await;
        assert_eq!(status, StatusCode::OK);
        !bodies.iter().any(|b| b == marker)
    }

    /// Waits until `bearer`'s list is answered by the replica.
    async fn until_replica_serves(&self, bearer: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for round in 0.. {
            if self
                .served_by_replica(bearer, &format!("probe {round}"))
                .await
            {
                return;
            }
            assert!(Instant::now() < deadline, "the replica never served");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn a_writer_reads_its_own_write_while_others_read_the_paused_replica() {
    let setup = setup(60_000).await;
    let (_, writer) = member(&setup.app, &setup.admin, "w@example.com", &setup.role).await;
    let (_, other) = member(&setup.app, &setup.admin, "o@example.com", &setup.role).await;
    setup.until_replica_serves(&other).await;

    setup.caught_up().await;
    setup.replay(false).await;
    setup.behind_the_back("hidden").await;
    // Served by the replica: the note written behind its back is missing.
    let (_, seen) = setup.bodies(&other, None).await;
    assert!(!seen.contains(&"hidden".to_owned()), "{seen:?}");

    // The writer's next read sees its write (the primary answers it), by
    // list, by key and counted, on any credential of the writer.
    let token = setup.write(&writer, "mine").await;
    let (status, seen) = setup.bodies(&writer, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(seen.contains(&"mine".to_owned()), "{seen:?}");
    let counted = setup
        .app
        .get("/api/data/app/notes?count=exact", &writer)
        .await;
    let rows = counted.data().as_array().unwrap().clone();
    assert_eq!(
        counted.body["meta"]["total"],
        rows.len(),
        "{:?}",
        counted.body
    );
    let id = rows
        .iter()
        .find(|r| r["body"] == "mine")
        .expect("the write, counted")["id"]
        .as_i64()
        .unwrap();
    let one = setup
        .app
        .get(&format!("/api/data/app/notes/{id}"), &writer)
        .await;
    assert_eq!(one.status, StatusCode::OK, "{:?}", one.body);
    let again = setup.app.login("w@example.com", "member-password-1").await;
    let (_, seen) = setup.bodies(&again, None).await;
    assert!(seen.contains(&"mine".to_owned()), "{seen:?}");

    // Another user sees it once it sends the write's token back; without
    // it, the replica still answers.
    let (_, seen) = setup.bodies(&other, Some(&token)).await;
    assert!(seen.contains(&"mine".to_owned()), "{seen:?}");
    let (_, seen) = setup.bodies(&other, None).await;
    assert!(!seen.contains(&"mine".to_owned()), "{seen:?}");
    // A token that is not one is ignored.
    let (status, _) = setup.bodies(&other, Some("not a token")).await;
    assert_eq!(status, StatusCode::OK);

    setup.replay(true).await;
    setup.caught_up().await;
    let (_, seen) = setup.bodies(&other, None).await;
    assert!(
        seen.ends_with(&["hidden".to_owned(), "mine".to_owned()]),
        "{seen:?}"
    );
    // Replayed, the writer's reads go to the replica again.
    setup.until_replica_serves(&writer).await;
}

/// A row filter reading `$USER.email` (from svc.users, in the read's own
/// statement): an email changed while replay is paused governs the next
/// read, though the replica still holds the old one.
#[tokio::test]
async fn a_user_value_a_row_filter_reads_is_current_on_the_next_read() {
    let setup = setup(60_000).await;
    let role = create_role(&setup.app, &setup.admin, "Mailboxes").await;
    grant(
        &setup.app,
        &setup.admin,
        &role,
        &setup.resource,
        "read",
        json!({ "body": { "eq": "$USER.email" } }),
        Value::Null,
    )
    .await;
    let (user, reader) = member(&setup.app, &setup.admin, "first@example.com", &role).await;
    let (_, plain) = member(&setup.app, &setup.admin, "plain@example.com", &setup.role).await;
    setup.behind_the_back("first@example.com").await;
    setup.behind_the_back("second@example.com").await;
    setup.until_replica_serves(&plain).await;
    assert_eq!(setup.bodies(&reader, None).await.1, ["first@example.com"]);
    setup.caught_up().await;
    setup.replay(false).await;
    let changed = setup
        .app
        .patch(
            &format!("/admin/api/users/{user}"),
            &setup.admin,
            json!({ "data": { "email": "second@example.com" } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{:?}", changed.body);
    let (status, seen) = setup.bodies(&reader, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(seen, ["second@example.com"]);
    setup.replay(true).await;
}

/// Changes are made through the test instance and read through another
/// one that does not listen for change notifications: only the check of
/// the primary's versions keeps it from the paused replica's old grants.
#[tokio::test]
async fn a_revocation_governs_the_next_read_while_replay_is_paused() {
    let setup = setup(60_000).await;
    let (_other, other) = serve_with(
        &setup.primary.url(DATABASE),
        &[
            ("TESSERA_LISTEN_FOR_CHANGES", "false"),
            ("TESSERA_DATABASE_READ_URLS", &setup.replica.url(DATABASE)),
        ],
    )
    .await;
    let (user, reader) = member(&setup.app, &setup.admin, "r@example.com", &setup.role).await;
    let second = setup.app.login("r@example.com", "member-password-1").await;
    let read = async |bearer: &str| setup.bodies_at(&other, bearer, None).await.0;
    // The other instance learns the callers and the table, served by the replica.
    assert_eq!(read(&second).await, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(20);
    for round in 0.. {
        setup.caught_up().await;
        setup.replay(false).await;
        let marker = format!("probe {round}");
        setup.behind_the_back(&marker).await;
        let (_, seen) = setup.bodies_at(&other, &reader, None).await;
        setup.replay(true).await;
        if !seen.contains(&marker) {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both callers remembered by the other instance at the state the
    // paused replica holds.
    setup.caught_up().await;
    assert_eq!(read(&second).await, StatusCode::OK);
    assert_eq!(read(&reader).await, StatusCode::OK);
    setup.caught_up().await;
    setup.replay(false).await;

    // A session ended: refused at once, the other session still reads.
    let ended = setup
        .app
        .call(Method::POST, "/api/auth/logout", Some(&second), None)
        .await;
    assert_eq!(ended.status, StatusCode::NO_CONTENT);
    assert_eq!(read(&second).await, StatusCode::UNAUTHORIZED);
    assert_eq!(read(&reader).await, StatusCode::OK);

    // The read grant removed: refused on the next read.
    let revoked = setup
        .app
        .delete(&format!("/admin/api/grants/{}", setup.grant), &setup.admin)
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    assert_eq!(read(&reader).await, StatusCode::FORBIDDEN);

    // Granted again: read. The table hidden: not found; exposed again: read.
    grant(
        &setup.app,
        &setup.admin,
        &setup.role,
        &setup.resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    assert_eq!(read(&reader).await, StatusCode::OK);
    expose(&setup.app, &setup.admin, &setup.resource, &[]).await;
    assert_eq!(read(&reader).await, StatusCode::NOT_FOUND);
    expose(&setup.app, &setup.admin, &setup.resource, &["GET"]).await;
    assert_eq!(read(&reader).await, StatusCode::OK);

    // A column the replica has not replayed: the primary answers.
    let added = setup
        .app
        .post(
            "/admin/api/schema/app/tables/notes/columns",
            &setup.admin,
            json!({ "data": { "name": "extra", "dataType": "integer" } }),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{:?}", added.body);
    assert_eq!(read(&reader).await, StatusCode::OK);

    // The membership removed: refused.
    let removed = setup
        .app
        .delete(
            &format!("/admin/api/roles/{}/members/{user}", setup.role),
            &setup.admin,
        )
        .await;
    assert!(removed.status.is_success(), "{:?}", removed.body);
    assert_eq!(read(&reader).await, StatusCode::FORBIDDEN);
    setup.replay(true).await;
}

/// A writer's transaction that commits after a later one (an import still
/// running while others write): the replica that replayed the later one
/// but not the writer's commit does not answer the writer.
#[tokio::test]
async fn a_write_committed_after_a_later_one_is_waited_for() {
    use sea_orm::{ConnectionTrait, TransactionTrait};
    let setup = setup(60_000).await;
    let (user, writer) = member(&setup.app, &setup.admin, "late@example.com", &setup.role).await;
    let (_, other) = member(&setup.app, &setup.admin, "other@example.com", &setup.role).await;
    setup.until_replica_serves(&other).await;
    let db = sea_orm::Database::connect(setup.primary.url(DATABASE))
        .await
        .unwrap();
    let open = db.begin().await.unwrap();
    // What a Data API write does in its statement: the row and its mark.
    open.execute_unprepared(&format!(
        "INSERT INTO app.notes (body) VALUES ('late'); \
         INSERT INTO svc.write_marks VALUES ('{user}', pg_backend_pid(), \
         pg_current_xact_id(), pg_current_wal_insert_lsn(), now())"
    ))
    .await
    .unwrap();
    setup.behind_the_back("later").await;
    setup.caught_up().await;
    setup.replay(false).await;
    open.commit().await.unwrap();
    // The watcher has seen the replica past the write's own rows (only its
    // commit is missing there), so the replica is the writer's candidate.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (_, seen) = setup.bodies(&writer, None).await;
    assert!(seen.contains(&"late".to_owned()), "{seen:?}");
    let (_, seen) = setup.bodies(&other, None).await;
    assert!(
        seen.contains(&"later".to_owned()) && !seen.contains(&"late".to_owned()),
        "{seen:?}"
    );
    setup.replay(true).await;
    db.close().await.unwrap();
}

/// DataViews and realtime follow the same rules: the view of a user who
/// did not write is answered by the paused replica, the writer's by the
/// primary; an event whose transaction the replica has not replayed is
/// delivered with its row all the same.
#[tokio::test]
async fn views_and_realtime_events_follow_the_same_rules() {
    let setup = setup(60_000).await;
    let (_, writer) = member(&setup.app, &setup.admin, "vw@example.com", &setup.role).await;
    let (_, other) = member(&setup.app, &setup.admin, "vo@example.com", &setup.role).await;
    let view = setup
        .app
        .post(
            "/admin/api/dataviews",
            &setup.admin,
            json!({ "data": { "slug": "note-count", "name": "Notes", "source": "app.notes",
                "columns": [ { "name": "count", "agg": "count" } ], "limit": 10 } }),
        )
        .await;
    assert_eq!(view.status, StatusCode::CREATED, "{:?}", view.body);
    let id = view.data()["id"].as_str().unwrap().to_owned();
    let published = setup
        .app
        .post(
            &format!("/admin/api/dataviews/{id}/publish"),
            &setup.admin,
            json!({}),
        )
        .await;
    assert_eq!(published.status, StatusCode::OK, "{:?}", published.body);
    let granted = setup
        .app
        .post(
            "/admin/api/grants",
            &setup.admin,
            json!({ "data": { "roleId": setup.role, "dataViewId": id, "action": "read" } }),
        )
        .await;
    assert_eq!(granted.status, StatusCode::CREATED, "{:?}", granted.body);
    let count = async |bearer: &str| {
        let answer = setup.app.get("/api/views/note-count", bearer).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        answer.data()[0]["count"].as_i64().unwrap()
    };
    setup.until_replica_serves(&other).await;
    let mut stream = crate::realtime::Stream::open(
        &setup.app.address,
        "subscribe=app.notes",
        Some(&other),
        None,
    )
    .await
    .unwrap();

    setup.caught_up().await;
    let before = count(&other).await;
    setup.replay(false).await;
    setup.behind_the_back("hidden").await;
    assert_eq!(count(&other).await, before, "the replica answers the view");
    setup.write(&writer, "fresh").await;
    assert_eq!(
        count(&writer).await,
        before + 2,
        "the writer's view sees its write"
    );

    // Both events come, rows included, though the replica has neither.
    let mut bodies = Vec::new();
    while bodies.len() < 2 {
        let event = stream.next().await;
        if let Some(body) = event.data["row"]["body"].as_str() {
            bodies.push(body.to_owned());
        }
    }
    assert_eq!(bodies, ["hidden", "fresh"]);
    setup.replay(true).await;
}

#[tokio::test]
async fn a_replica_down_or_behind_is_skipped_and_used_again() {
    let setup = Arc::new(setup(1_000).await);
    let (_, reader) = member(&setup.app, &setup.admin, "d@example.com", &setup.role).await;
    setup.until_replica_serves(&reader).await;

    // Stopped under load: every read is answered.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (setup, reader, stop) = (setup.clone(), reader.clone(), stop.clone());
            tokio::spawn(async move {
                let mut answered = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (status, _) = setup.bodies(&reader, None).await;
                    assert_eq!(
                        status,
                        StatusCode::OK,
                        "a read failed with the replica down"
                    );
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let down = setup.replica.clone();
    tokio::task::spawn_blocking(move || down.down())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.await.unwrap() > 0);
    }
    // Down: the primary answers, the note written behind its back included.
    setup.behind_the_back("while down").await;
    let (_, seen) = setup.bodies(&reader, None).await;
    assert!(seen.contains(&"while down".to_owned()), "{seen:?}");

    // Back: used again.
    let up = setup.replica.clone();
    tokio::task::spawn_blocking(move || up.up()).await.unwrap();
    setup.until_replica_serves(&reader).await;

    // Behind by more than data.replica_max_lag_ms: skipped; caught up: used.
    setup.caught_up().await;
    setup.replay(false).await;
    setup.behind_the_back("lagging").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, seen) = setup.bodies(&reader, None).await;
        if seen.contains(&"lagging".to_owned()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lagging replica kept serving"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    setup.replay(true).await;
    setup.until_replica_serves(&reader).await;
}
