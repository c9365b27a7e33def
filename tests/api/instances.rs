//! Several instances as one (API.md section 1): a change answered by one
//! instance governs the very next request of another. The other instance is a
//! real `tessera serve` process that does not listen for change
//! notifications, so only the version check can keep it from a stale answer.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use testkit::spawn_app;

use crate::binary::serve_with;
use crate::data::{create_role, create_table, encode, expose, grant, member};

/// Rounds of each kind of change; every round makes two changes.
const ROUNDS: usize = 50;

/// A test app, its administrator's session, another instance that does
/// not listen for change notifications, and table `app.notes` (`id`, `title`).
struct Setup {
    app: testkit::TestApp,
    admin: String,
    _other: crate::binary::Served,
    other: String,
    client: reqwest::Client,
    resource: String,
}

async fn setup(id: Value) -> Setup {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_other, other) = serve_with(&app.db.url, &[("TESSERA_LISTEN_FOR_CHANGES", "false")]).await;
    let columns = json!([id, { "name": "title", "dataType": "text" }]);
    let resource = create_table(&app, &admin, "app", "notes", columns).await;
    Setup {
        app,
        admin,
        _other,
        other,
        client: reqwest::Client::new(),
        resource,
    }
}

#[tokio::test]
async fn every_change_on_one_instance_holds_on_the_next_request_of_another() {
    let Setup {
        app,
        admin,
        _other,
        other,
        client,
        resource,
    } = setup(json!({ "name": "id", "dataType": "bigint", "primaryKey": true })).await;
    expose(&app, &admin, &resource, &["GET"]).await;
    app.db
        .sql("INSERT INTO app.notes VALUES (1, 'one') RETURNING title")
        .await;
    let role = create_role(&app, &admin, "Readers").await;
    let (_, reader) = member(&app, &admin, "reader@example.com", &role).await;
    let list = format!("{other}/api/data/app/notes");
    let read = |url: String| {
        let client = client.clone();
        let reader = reader.clone();
        async move {
            let response = client.get(url).bearer_auth(reader).send().await.unwrap();
            let status = response.status();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    // The other instance learns the caller and the table before the changes.
    assert_eq!(read(list.clone()).await.0, StatusCode::FORBIDDEN);

    // Grants: granted, the next read on the other instance sees the row;
    // revoked, the next read is refused.
    for round in 0..ROUNDS {
        let id = grant(
            &app,
            &admin,
            &role,
            &resource,
            "read",
            Value::Null,
            Value::Null,
        )
        .await;
        let (status, body) = read(list.clone()).await;
        assert_eq!(status, StatusCode::OK, "round {round} after grant: {body}");
        assert_eq!(body["data"][0]["title"], "one", "round {round}");
        let revoked = app.delete(&format!("/admin/api/grants/{id}"), &admin).await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT);
        let (status, body) = read(list.clone()).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "round {round} after revoke: {body}"
        );
    }

    // Exposure: hidden, the table is not found; exposed again, it reads.
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
    for round in 0..ROUNDS {
        expose(&app, &admin, &resource, &[]).await;
        let (status, body) = read(list.clone()).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "round {round} hidden: {body}"
        );
        expose(&app, &admin, &resource, &["GET"]).await;
        let (status, body) = read(list.clone()).await;
        assert_eq!(status, StatusCode::OK, "round {round} exposed: {body}");
    }

    // Columns: a column added on one instance is answered by the other.
    for round in 0..ROUNDS {
        let name = format!("c{round}");
        let added = app
            .post(
                "/admin/api/schema/app/tables/notes/columns",
                &admin,
                json!({ "data": { "name": name, "dataType": "integer", "default": round.to_string() } }),
            )
            .await;
        assert_eq!(added.status, StatusCode::CREATED, "{:?}", added.body);
        let (status, body) = read(format!("{list}?select={name}")).await;
        assert_eq!(status, StatusCode::OK, "round {round} column: {body}");
        assert_eq!(body["data"][0][&name], json!(round), "round {round}");
    }

    // Settings: the origins a CORS preflight on the other instance allows.
    for round in 0..ROUNDS {
        let origin = format!("https://app{round}.example");
        let changed = app
            .patch(
                "/admin/api/settings",
                &admin,
                json!({ "data": { "security.cors_origins": [origin] } }),
            )
            .await;
        assert_eq!(changed.status, StatusCode::OK);
        let preflight = client
            .request(Method::OPTIONS, &list)
            .header("Origin", &origin)
            .header("Access-Control-Request-Method", "GET")
            .send()
            .await
            .unwrap();
        assert_eq!(preflight.status(), StatusCode::NO_CONTENT, "round {round}");
        let previous = format!("https://app{}.example", round.wrapping_sub(1));
        let stale = client
            .request(Method::OPTIONS, &list)
            .header("Origin", &previous)
            .header("Access-Control-Request-Method", "GET")
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status(), StatusCode::FORBIDDEN, "round {round}");
    }
    // A role membership removed: the caller's next read is refused.
    let removed = app
        .delete(
            &format!(
                "/admin/api/roles/{role}/members/{}",
                app.services
                    .sign_in
                    .authenticate(&reader)
                    .await
                    .unwrap()
                    .user_id
            ),
            &admin,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{:?}", removed.body);
    let filter = encode(r#"{"id":{"eq":1}}"#);
    let (status, body) = read(format!("{list}?filter={filter}")).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "after leaving the role: {body}"
    );
}

#[tokio::test]
async fn a_write_on_another_instance_follows_the_grants_of_the_moment() {
    let Setup {
        app,
        admin,
        _other,
        other,
        client,
        resource,
    } = setup(
        json!({ "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" }),
    )
    .await;
    expose(&app, &admin, &resource, &["GET", "POST"]).await;
    let role = create_role(&app, &admin, "Writers").await;
    let (_, writer) = member(&app, &admin, "writer@example.com", &role).await;
    let write = || {
        client
            .post(format!("{other}/api/data/app/notes"))
            .bearer_auth(&writer)
            .json(&json!({ "data": { "title": "t" } }))
            .send()
    };
    let rows = || async { app.db.sql("SELECT count(*)::text FROM app.notes").await };
    // The other instance learns the caller and the table before the changes.
    assert_eq!(write().await.unwrap().status(), StatusCode::FORBIDDEN);
    for round in 0..ROUNDS / 5 {
        let id = grant(
            &app,
            &admin,
            &role,
            &resource,
            "create",
            Value::Null,
            Value::Null,
        )
        .await;
        let created = write().await.unwrap();
        assert_eq!(
            created.status(),
            StatusCode::CREATED,
            "round {round} after grant"
        );
        assert_eq!(rows().await, Some((round + 1).to_string()));
        let revoked = app.delete(&format!("/admin/api/grants/{id}"), &admin).await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT);
        let refused = write().await.unwrap();
        assert_eq!(
            refused.status(),
            StatusCode::FORBIDDEN,
            "round {round} after revoke"
        );
        assert_eq!(
            rows().await,
            Some((round + 1).to_string()),
            "a refused write wrote"
        );
    }
}
