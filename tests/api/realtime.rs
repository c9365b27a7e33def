//! Realtime (API.md section 11): row changes over Server-Sent Events under
//! each subscriber's grants, row filters and column masks; refusals,
//! revocation, resume, several instances, slow subscribers.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{create_role, create_table, encode, expose, grant, member};

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub(crate) id: Option<i64>,
    pub(crate) kind: String,
    pub(crate) data: Value,
}

/// An open realtime stream, read frame by frame.
pub(crate) struct Stream {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl Stream {
    /// Opens `GET {address}/api/realtime?{query}` with `bearer` (if any) and
    /// `Last-Event-ID` (if any); answers the stream or the refusal.
    pub(crate) async fn open(
        address: &str,
        query: &str,
        bearer: Option<&str>,
        last_event_id: Option<&str>,
    ) -> Result<Self, (StatusCode, Value)> {
        let mut request = reqwest::Client::new().get(format!("{address}/api/realtime?{query}"));
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        if response.status() != StatusCode::OK {
            let status = response.status();
            return Err((status, response.json().await.unwrap_or(Value::Null)));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Ok(Self {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        })
    }

    /// The next event (comments skipped) within `wait`; `None` when the
    /// stream ended or nothing came.
    pub(crate) async fn next_within(&mut self, wait: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&frame) {
                    return Some(event);
                }
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// The next event, which must come within 5 s.
    pub(crate) async fn next(&mut self) -> Event {
        self.next_within(Duration::from_secs(5))
            .await
            .expect("an event within 5 s")
    }

    /// Whether the server ended the stream within `wait`.
    pub(crate) async fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
                Err(_) => return false,
            }
        }
    }
}

fn parse(frame: &str) -> Option<Event> {
    let (mut id, mut kind, mut data) = (None, None, None);
    for line in frame.lines() {
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.parse().unwrap());
        } else if let Some(value) = line.strip_prefix("event: ") {
            kind = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str(value).unwrap());
        }
    }
    Some(Event {
        id,
        kind: kind?,
        data: data.unwrap_or(Value::Null),
    })
}

/// `app.notes` (id, owner_id, title, secret), exposed for every method.
pub(crate) async fn notes(app: &TestApp, admin: &str) -> String {
    let resource = create_table(
        app,
        admin,
        "app",
        "notes",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "owner_id", "dataType": "uuid", "nullable": false },
            { "name": "title", "dataType": "text", "nullable": false },
            { "name": "secret", "dataType": "text" },
        ]),
    )
    .await;
    expose(app, admin, &resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    resource
}

pub(crate) async fn insert(app: &TestApp, admin: &str, owner: &str, title: &str) -> i64 {
    let row = app
        .post(
            "/api/data/app/notes",
            admin,
            json!({ "data": { "owner_id": owner, "title": title, "secret": "s" } }),
        )
        .await;
    assert_eq!(row.status, StatusCode::CREATED, "{:?}", row.body);
    row.data()["id"].as_i64().unwrap()
}

async fn update(app: &TestApp, admin: &str, id: i64, data: Value) {
    let row = app
        .patch(
            &format!("/api/data/app/notes/{id}"),
            admin,
            json!({ "data": data }),
        )
        .await;
    assert_eq!(row.status, StatusCode::OK, "{:?}", row.body);
}

#[tokio::test]
async fn each_subscriber_receives_exactly_the_changes_its_grants_show() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let role = create_role(&app, &admin, "Owners").await;
    let own = json!({ "owner_id": { "eq": "$USER.id" } });
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        own,
        json!(["id", "owner_id", "title"]),
    )
    .await;
    let (alice, alice_session) = member(&app, &admin, "alice@example.com", &role).await;
    let (bob, bob_session) = member(&app, &admin, "bob@example.com", &role).await;
    let subscribe = "subscribe=app.notes";
    let mut alices = Stream::open(&app.address, subscribe, Some(&alice_session), None)
        .await
        .unwrap();
    let mut bobs = Stream::open(&app.address, subscribe, Some(&bob_session), None)
        .await
        .unwrap();
    let mut admins = Stream::open(&app.address, subscribe, Some(&admin), None)
        .await
        .unwrap();

    let first = insert(&app, &admin, &alice, "alice 1").await;
    let seen = alices.next().await;
    assert_eq!(seen.kind, "insert");
    // The row as the list route shows it to alice: no `secret`.
    assert_eq!(
        seen.data,
        json!({ "resource": "app.notes", "row": { "id": first, "owner_id": alice, "title": "alice 1" } })
    );
    let by_admin = admins.next().await;
    assert_eq!(by_admin.data["row"]["secret"], "s");
    assert_eq!(by_admin.id, seen.id);
    let second = insert(&app, &admin, &bob, "bob 1").await;
    let bobs_first = bobs.next().await;
    assert_eq!(bobs_first.data["row"]["id"], second);
    assert!(bobs_first.id > seen.id);

    // A change alice cannot see (the secret) sends her nothing; her next
    // event is the next change she can see.
    update(&app, &admin, first, json!({ "secret": "changed" })).await;
    update(&app, &admin, first, json!({ "title": "alice 1b" })).await;
    let changed = alices.next().await;
    assert_eq!(changed.kind, "update");
    assert_eq!(changed.data["row"]["title"], "alice 1b");
    assert_eq!(changed.data["old"]["title"], "alice 1");

    // Handing the row to bob: a delete for alice (key only), an insert for bob.
    update(&app, &admin, first, json!({ "owner_id": bob })).await;
    let gone = alices.next().await;
    assert_eq!(gone.kind, "delete");
    assert_eq!(
        gone.data,
        json!({ "resource": "app.notes", "row": { "id": first } })
    );
    let mut bobs_next = bobs.next().await;
    if bobs_next.data["row"]["id"] == second {
        bobs_next = bobs.next().await;
    }
    assert_eq!(bobs_next.kind, "insert");
    assert_eq!(bobs_next.data["row"]["title"], "alice 1b");
    // A filter of the subscriber's own narrows further.
    let filter = encode(&json!({ "title": { "like": "keep%" } }).to_string());
    let mut filtered = Stream::open(
        &app.address,
        &format!("subscribe=app.notes&filter={filter}"),
        Some(&alice_session),
        None,
    )
    .await
    .unwrap();
    insert(&app, &admin, &alice, "drop me").await;
    let kept = insert(&app, &admin, &alice, "keep me").await;
    assert_eq!(filtered.next().await.data["row"]["id"], kept);
    // Plain SQL is a change like any other.
    app.db
        .sql(&format!("DELETE FROM app.notes WHERE id = {kept}"))
        .await;
    let deleted = filtered.next().await;
    assert_eq!(
        (deleted.kind.as_str(), &deleted.data["row"]["id"]),
        ("delete", &json!(kept))
    );
}

#[tokio::test]
async fn a_masked_column_stays_masked_in_events() {
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
        json!(["id", "title"]),
    )
    .await;
    let open = json!({ "title": { "like": "open%" } });
    grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        open,
        json!(["id", "title", "secret"]),
    )
    .await;
    let (owner, session) = member(&app, &admin, "reader@example.com", &role).await;
    let mut stream = Stream::open(&app.address, "subscribe=app.notes", Some(&session), None)
        .await
        .unwrap();
    insert(&app, &admin, &owner, "closed").await;
    insert(&app, &admin, &owner, "open one").await;
    let closed = stream.next().await.data["row"].clone();
    let opened = stream.next().await.data["row"].clone();
    assert_eq!(closed["secret"], Value::Null, "{closed}");
    assert_eq!(opened["secret"], "s", "{opened}");
    assert!(closed.get("owner_id").is_none(), "{closed}");
    // The same as the list route.
    let listed = app.get("/api/data/app/notes?sort=id", &session).await;
    assert_eq!(listed.data(), &json!([closed, opened]));
    // The role's Data API document describes the route.
    let document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    let route = &document.body["paths"]["/api/realtime"]["get"];
    assert!(
        route["parameters"][0]["description"]
            .as_str()
            .unwrap()
            .contains("app.notes"),
        "{route}"
    );
    assert!(
        route["responses"]["200"]["content"]["text/event-stream"].is_object(),
        "{route}"
    );
}

#[tokio::test]
async fn refusals_come_before_the_stream_as_the_list_route_answers() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let hidden = create_table(
        &app,
        &admin,
        "app",
        "hidden",
        json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true }]),
    )
    .await;
    let posting = create_table(
        &app,
        &admin,
        "app",
        "posting",
        json!([
        { "name": "id", "dataType": "bigint", "primaryKey": true }]),
    )
    .await;
    expose(&app, &admin, &posting, &["POST"]).await;
    let role = create_role(&app, &admin, "Nobody").await;
    let (_, session) = member(&app, &admin, "nobody@example.com", &role).await;
    let refused = |query: &'static str, bearer: Option<String>| {
        let address = app.address.clone();
        async move {
            let answer = Stream::open(&address, query, bearer.as_deref(), None).await;
            let (status, body) = answer.err().expect("refused");
            (
                status,
                body["errors"][0]["code"].as_str().unwrap_or("").to_owned(),
            )
        }
    };
    let s = Some(session.clone());
    let a = Some(admin.clone());
    assert_eq!(
        refused("subscribe=app.notes", None).await,
        (StatusCode::UNAUTHORIZED, "AUTHENTICATION_REQUIRED".into())
    );
    assert_eq!(
        refused("subscribe=app.notes", s.clone()).await,
        (StatusCode::FORBIDDEN, "PERMISSION_DENIED".into())
    );
    assert_eq!(
        refused("subscribe=app.hidden", a.clone()).await,
        (StatusCode::NOT_FOUND, "NOT_FOUND".into())
    );
    assert_eq!(
        refused("subscribe=app.nothing", a.clone()).await,
        (StatusCode::NOT_FOUND, "NOT_FOUND".into())
    );
    assert_eq!(
        refused("subscribe=app.posting", a.clone()).await,
        (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED".into())
    );
    for bad in [
        "",
        "subscribe=",
        "subscribe=notes",
        "subscribe=app.notes&filter=%7B",
        "subscribe=app.notes&filter=%7B%22nope%22%3A%7B%22eq%22%3A1%7D%7D",
    ] {
        assert_eq!(
            refused(bad, a.clone()).await,
            (StatusCode::BAD_REQUEST, "INVALID_QUERY".into()),
            "{bad}"
        );
    }
    // EventSource passes the credential in the query.
    let token = app.create_token(&admin, "API").await;
    assert!(
        Stream::open(
            &app.address,
            &format!("subscribe=app.notes&access_token={token}"),
            None,
            None
        )
        .await
        .is_ok()
    );
    // Past the instance's limit: 503 with Retry-After; lowering it drops nothing.
    let mut open = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "realtime.max_subscribers": 1 } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.body);
    let full = reqwest::Client::new()
        .get(format!("{}/api/realtime?subscribe=app.notes", app.address))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(full.headers().contains_key("retry-after"));
    // The streams already open go on.
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = insert(&app, &admin, &owner, "still followed").await;
    assert_eq!(open.next().await.data["row"]["id"], id);
    let _ = (resource, hidden);
}

#[tokio::test]
async fn revoking_the_credential_or_the_grant_ends_the_stream_within_a_second() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = notes(&app, &admin).await;
    let role = create_role(&app, &admin, "Readers").await;
    let read = grant(
        &app,
        &admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, session) = member(&app, &admin, "reader@example.com", &role).await;
    let token = app.create_token(&session, "API").await;
    let (other, other_session) = member(&app, &admin, "other@example.com", &role).await;
    let mut by_other = Stream::open(
        &app.address,
        "subscribe=app.notes",
        Some(&other_session),
        None,
    )
    .await
    .unwrap();
    let mut by_token = Stream::open(&app.address, "subscribe=app.notes", Some(&token), None)
        .await
        .unwrap();
    let mut by_session = Stream::open(&app.address, "subscribe=app.notes", Some(&session), None)
        .await
        .unwrap();
    let tokens = app.get("/api/auth/tokens", &session).await;
    let id = tokens.data()[0]["id"].as_str().unwrap().to_owned();
    let revoked = app
        .delete(&format!("/api/auth/tokens/{id}"), &session)
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{:?}", revoked.body);
    let started = tokio::time::Instant::now();
    assert!(
        by_token.ends_within(Duration::from_millis(1500)).await,
        "the token's stream stayed open"
    );
    assert!(started.elapsed() < Duration::from_millis(1500));
    // A deactivated account's stream ends the same way.
    let deactivated = app
        .patch(
            &format!("/admin/api/users/{other}"),
            &admin,
            json!({ "data": { "active": false } }),
        )
        .await;
    assert_eq!(deactivated.status, StatusCode::OK, "{:?}", deactivated.body);
    assert!(
        by_other.ends_within(Duration::from_millis(1500)).await,
        "the deactivated account's stream stayed open"
    );
    // The session's stream is still open, until its grant goes.
    let removed = app
        .delete(&format!("/admin/api/grants/{read}"), &admin)
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{:?}", removed.body);
    assert!(
        by_session.ends_within(Duration::from_millis(1500)).await,
        "the session's stream stayed open"
    );
}

#[tokio::test]
async fn last_event_id_replays_what_was_missed_and_resets_otherwise() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    insert(&app, &admin, &owner, "seen").await;
    let last = stream.next().await.id.unwrap();
    drop(stream);
    let missed = [
        insert(&app, &admin, &owner, "missed 1").await,
        insert(&app, &admin, &owner, "missed 2").await,
    ];
    let mut resumed = Stream::open(
        &app.address,
        "subscribe=app.notes",
        Some(&admin),
        Some(&last.to_string()),
    )
    .await
    .unwrap();
    for id in missed {
        let event = resumed.next().await;
        assert_eq!(
            (event.kind.as_str(), &event.data["row"]["id"]),
            ("insert", &json!(id))
        );
    }
    let live = insert(&app, &admin, &owner, "live").await;
    assert_eq!(resumed.next().await.data["row"]["id"], live);
    // The query parameter works too; a malformed or unknown id resets.
    let mut by_query = Stream::open(
        &app.address,
        &format!("subscribe=app.notes&lastEventId={last}"),
        Some(&admin),
        None,
    )
    .await
    .unwrap();
    assert_eq!(by_query.next().await.data["row"]["id"], missed[0]);
    for bad in ["nonsense", "12"] {
        let mut reset = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), Some(bad))
            .await
            .unwrap();
        let first = reset.next().await;
        assert_eq!(
            (first.kind.as_str(), first.id, &first.data),
            ("reset", None, &json!({}))
        );
    }
    // Older than the window: reset.
    let set = app
        .patch(
            "/admin/api/settings",
            &admin,
            json!({ "data": { "realtime.replay_seconds": 0 } }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK);
    let mut old = Stream::open(
        &app.address,
        "subscribe=app.notes",
        Some(&admin),
        Some(&last.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(old.next().await.kind, "reset");
}

#[tokio::test]
async fn a_write_on_one_instance_reaches_subscribers_on_another() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let peer = app.spawn_peer().await;
    let mut on_peer = Stream::open(&peer, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    let mut here = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    let id = insert(&app, &admin, &owner, "from the first").await;
    let (a, b) = (on_peer.next().await, here.next().await);
    assert_eq!(a.data["row"]["id"], id);
    // Event ids are the database's: equal on both instances.
    assert_eq!(a.id, b.id);
}

#[tokio::test]
async fn a_stalled_subscriber_is_dropped_without_delaying_another() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    notes(&app, &admin).await;
    let owner = app.get("/api/auth/me", &admin).await.data()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stalled = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    let mut reader = Stream::open(&app.address, "subscribe=app.notes", Some(&admin), None)
        .await
        .unwrap();
    // 3,000 changes of 2 KB each: more than a subscriber's queue and the
    // socket buffers hold for a client that reads nothing.
    let started = tokio::time::Instant::now();
    app.db
        .sql(&format!(
            "INSERT INTO app.notes (owner_id, title) SELECT '{owner}', repeat('x', 2000) || n FROM generate_series(1, 3000) n"
        ))
        .await;
    let mut received = 0;
    while received < 3000 {
        let event = reader.next().await;
        assert_eq!(event.kind, "insert");
        received += 1;
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The stalled one was dropped: what it gets ends with an overflow.
    let mut last = None;
    while let Some(event) = stalled.next_within(Duration::from_secs(5)).await {
        last = Some(event.kind);
    }
    assert_eq!(last.as_deref(), Some("overflow"));
}
