//! API.md 13 through HTTP with a non-administrator: related rows (embeds),
//! aggregates, full-text search and upserts, each under the grants, row
//! filters and column limits of every table it touches.

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::data::{create_role, create_table, encode, expose, grant, member};

/// Authors, their posts and the posts' comments; answers the resource ids.
async fn blog(app: &TestApp, admin: &str) -> (String, String, String) {
    let key = json!({ "name": "id", "dataType": "bigint", "primaryKey": true });
    let authors = create_table(
        app,
        admin,
        "app",
        "authors",
        json!([key,
        { "name": "name", "dataType": "text" },
        { "name": "email", "dataType": "text" },
        { "name": "team", "dataType": "text" }]),
    )
    .await;
    let posts = create_table(app, admin, "app", "posts", json!([key,
        { "name": "author_id", "dataType": "bigint", "foreignKey": { "targetTable": "authors", "targetColumn": "id" } },
        { "name": "title", "dataType": "text" },
        { "name": "body", "dataType": "text" },
        { "name": "score", "dataType": "integer" },
        { "name": "status", "dataType": "text" }])).await;
    let comments = create_table(app, admin, "app", "comments", json!([key,
        { "name": "post_id", "dataType": "bigint", "foreignKey": { "targetTable": "posts", "targetColumn": "id" } },
        { "name": "author_id", "dataType": "bigint", "foreignKey": { "targetTable": "authors", "targetColumn": "id" } },
        { "name": "text", "dataType": "text" },
        { "name": "approved", "dataType": "boolean" }])).await;
    for resource in [&authors, &posts, &comments] {
        expose(app, admin, resource, &["GET", "POST", "PATCH", "DELETE"]).await;
    }
    let rows = |path: &str, rows: Value| {
        let path = path.to_owned();
        async move {
            let answer = app.post(&path, admin, json!({ "data": rows })).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        }
    };
    rows(
        "/api/data/app/authors",
        json!([
        { "id": 1, "name": "Ada", "email": "ada@x.test", "team": "red" },
        { "id": 2, "name": "Bob", "email": "bob@x.test", "team": "blue" }]),
    )
    .await;
    rows("/api/data/app/posts", json!([
        { "id": 10, "author_id": 1, "title": "Rust web servers", "body": "a fast web server in rust", "score": 5, "status": "open" },
        { "id": 11, "author_id": 2, "title": "Java", "body": "java and rust compared", "score": 3, "status": "open" },
        { "id": 12, "author_id": 1, "title": "Closed", "body": "nothing", "score": 7, "status": "closed" },
        { "id": 13, "author_id": null, "title": "Orphan", "body": "web", "score": null, "status": "open" }])).await;
    rows(
        "/api/data/app/comments",
        json!([
        { "id": 102, "post_id": 10, "author_id": 2, "text": "second", "approved": true },
        { "id": 101, "post_id": 10, "author_id": 1, "text": "first", "approved": true },
        { "id": 103, "post_id": 10, "author_id": 2, "text": "hidden", "approved": false },
        { "id": 104, "post_id": 11, "author_id": 1, "text": "on java", "approved": true }]),
    )
    .await;
    (authors, posts, comments)
}

#[tokio::test]
async fn embeds_follow_foreign_keys_under_each_tables_grants() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (authors, posts, comments) = blog(&app, &admin).await;
    let role = create_role(&app, &admin, "readers").await;
    grant(
        &app,
        &admin,
        &role,
        &posts,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    // Red authors only, and never their email.
    grant(
        &app,
        &admin,
        &role,
        &authors,
        "read",
        json!({ "team": { "eq": "red" } }),
        json!(["id", "name", "team"]),
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &comments,
        "read",
        json!({ "approved": { "eq": true } }),
        Value::Null,
    )
    .await;
    let (_, reader) = member(&app, &admin, "reader@x.test", &role).await;

    let select = encode(
        "id,title,author:author_id(name,email),comments:app.comments!post_id(id,text,by:author_id(*))",
    );
    let list = app
        .get(
            &format!("/api/data/app/posts?select={select}&sort=id"),
            &reader,
        )
        .await;
    assert_eq!(list.status, StatusCode::OK, "{:?}", list.body);
    assert_eq!(
        list.data(),
        &json!([
            { "id": 10, "title": "Rust web servers", "author": { "name": "Ada" },
              "comments": [
                { "id": 101, "text": "first", "by": { "id": 1, "name": "Ada", "team": "red" } },
                { "id": 102, "text": "second", "by": null }] },
            { "id": 11, "title": "Java", "author": null,
              "comments": [{ "id": 104, "text": "on java", "by": { "id": 1, "name": "Ada", "team": "red" } }] },
            { "id": 12, "title": "Closed", "author": { "name": "Ada" }, "comments": [] },
            { "id": 13, "title": "Orphan", "author": null, "comments": [] }
        ])
    );
    // The get route takes the same select; the count path builds the same JSON.
    let one = app
        .get(
            &format!(
                "/api/data/app/posts/10?select={}",
                encode("id,author:author_id(*)")
            ),
            &reader,
        )
        .await;
    assert_eq!(
        one.data(),
        &json!({ "id": 10, "author": { "id": 1, "name": "Ada", "team": "red" } })
    );
    let counted = app
        .get(
            &format!("/api/data/app/posts?select={select}&sort=id&count=exact"),
            &reader,
        )
        .await;
    assert_eq!(counted.data(), list.data());
    assert_eq!(counted.body["meta"]["total"], 4);
    // An embed alone, without a column of the listed rows: the same on both paths.
    let only = encode("author:author_id(name)");
    let bare = app
        .get(
            &format!("/api/data/app/posts?select={only}&sort=id"),
            &reader,
        )
        .await;
    assert_eq!(
        bare.data(),
        &json!([{ "author": { "name": "Ada" } }, { "author": null },
                { "author": { "name": "Ada" } }, { "author": null }])
    );
    let bare_counted = app
        .get(
            &format!("/api/data/app/posts?select={only}&sort=id&count=exact"),
            &reader,
        )
        .await;
    assert_eq!(bare_counted.data(), bare.data());
    // Embeds inside a to-one embed: a to-one (a record in a record) and a
    // to-many, each under its own table's grants, the same on both paths.
    let nested =
        encode("id,post:post_id(title,author:author_id(name),comments:app.comments!post_id(id))");
    let deep = app
        .get(
            &format!("/api/data/app/comments?select={nested}&sort=id"),
            &reader,
        )
        .await;
    assert_eq!(deep.status, StatusCode::OK, "{:?}", deep.body);
    let rust = json!({ "title": "Rust web servers", "author": { "name": "Ada" },
                       "comments": [{ "id": 101 }, { "id": 102 }] });
    assert_eq!(
        deep.data(),
        &json!([
            { "id": 101, "post": rust },
            { "id": 102, "post": rust },
            { "id": 104, "post": { "title": "Java", "author": null, "comments": [{ "id": 104 }] } }
        ])
    );
    let deep_counted = app
        .get(
            &format!("/api/data/app/comments?select={nested}&sort=id&count=exact"),
            &reader,
        )
        .await;
    assert_eq!(deep_counted.data(), deep.data());

    // Each embed is what the caller could read of that table one by one.
    for post in list.data().as_array().unwrap() {
        let shown: Vec<i64> = post["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_i64().unwrap())
            .collect();
        let filter = encode(&json!({ "post_id": { "eq": post["id"] } }).to_string());
        let direct = app
            .get(
                &format!("/api/data/app/comments?filter={filter}&sort=id"),
                &reader,
            )
            .await;
        let direct: Vec<i64> = direct
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_i64().unwrap())
            .collect();
        assert_eq!(shown, direct);
    }

    // The role's document offers the embeds it may use.
    let document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    let select = document.body["paths"]["/api/data/app/posts"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "select")
        .unwrap()["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(select.contains("authors:author_id(*)"), "{select}");
    assert!(
        select.contains("comments:app.comments!post_id(*)"),
        "{select}"
    );
    assert!(document.body["paths"]["/api/batch"]["post"].is_object());

    // Refusals: a bad shape or name 400, no grant 403, hidden 404.
    for (select, field_part) in [
        ("id,author_id(name)", "alias"),
        ("id,a:title(id)", "not a foreign key"),
        ("id,a:nope(id)", "not a column"),
        ("id,c:app.comments!author_id(id)", "not a foreign key"),
        ("id,c:app.comments!post_id(nope)", "not a column"),
        (
            "id,a:author_id(x:author_id(y:author_id(z:author_id(id))))",
            "3 deep",
        ),
    ] {
        let answer = app
            .get(
                &format!("/api/data/app/posts?select={}", encode(select)),
                &reader,
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{select}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["errors"][0]["code"], "INVALID_QUERY");
        assert!(
            answer.body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains(field_part),
            "{select}: {:?}",
            answer.body
        );
    }
    let other = create_role(&app, &admin, "posts only").await;
    grant(
        &app,
        &admin,
        &other,
        &posts,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, posts_only) = member(&app, &admin, "posts@x.test", &other).await;
    let denied = app
        .get(
            &format!(
                "/api/data/app/posts?select={}",
                encode("id,a:author_id(name)")
            ),
            &posts_only,
        )
        .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{:?}", denied.body);
    // Nothing of a table without a read grant is told, its columns included.
    let guessed = app
        .get(
            &format!(
                "/api/data/app/posts?select={}",
                encode("id,c:app.comments!nope(id)")
            ),
            &posts_only,
        )
        .await;
    assert_eq!(guessed.status, StatusCode::FORBIDDEN, "{:?}", guessed.body);
    expose(&app, &admin, &authors, &[]).await;
    let hidden = app
        .get(
            &format!(
                "/api/data/app/posts?select={}",
                encode("id,a:author_id(name)")
            ),
            &reader,
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{:?}", hidden.body);
    // CSV is rows only; an administrator sees everything embedded.
    expose(&app, &admin, &authors, &["GET"]).await;
    let all = app
        .get(
            &format!(
                "/api/data/app/posts/11?select={}",
                encode("id,author:author_id(email)")
            ),
            &admin,
        )
        .await;
    assert_eq!(
        all.data(),
        &json!({ "id": 11, "author": { "email": "bob@x.test" } })
    );
}

#[tokio::test]
async fn aggregates_group_the_rows_the_caller_reads() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, posts, _) = blog(&app, &admin).await;
    let role = create_role(&app, &admin, "counters").await;
    // Open posts only, and the score hidden on Bob's.
    grant(
        &app,
        &admin,
        &role,
        &posts,
        "read",
        json!({ "status": { "eq": "open" } }),
        json!(["id", "author_id", "title", "status"]),
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &posts,
        "read",
        json!({ "and": [{ "status": { "eq": "open" } }, { "author_id": { "eq": 1 } }] }),
        Value::Null,
    )
    .await;
    let (_, counter) = member(&app, &admin, "counter@x.test", &role).await;

    let aggregate = |query: &str| {
        let app = &app;
        let counter = counter.clone();
        let query = query.to_owned();
        async move {
            app.get(&format!("/api/data/app/posts?{query}"), &counter)
                .await
        }
    };
    let grouped = aggregate(&format!(
        "aggregate={}&groupBy=author_id&sort=-n&count=exact",
        encode("n:count(),total:sum(score),best:max(score),titles:count(title)")
    ))
    .await;
    assert_eq!(grouped.status, StatusCode::OK, "{:?}", grouped.body);
    // Computed from the caller's own list: hidden scores count as null.
    let list = app.get("/api/data/app/posts?limit=1000", &counter).await;
    let rows = list.data().as_array().unwrap();
    let mut expected: Vec<Value> = Vec::new();
    for author in [json!(1), json!(2), Value::Null] {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["author_id"] == author).collect();
        let scores: Vec<i64> = mine
            .iter()
            .filter_map(|r| r.get("score").and_then(Value::as_i64))
            .collect();
        expected.push(json!({
            "author_id": author, "n": mine.len(),
            "total": if scores.is_empty() { Value::Null } else { json!(scores.iter().sum::<i64>()) },
            "best": scores.iter().max(), "titles": mine.len(),
        }));
    }
    let mut got = grouped.data().as_array().unwrap().clone();
    got.sort_by_key(|g| g["author_id"].as_i64().unwrap_or(i64::MAX));
    assert_eq!(got, expected, "{:?}", grouped.body);
    assert_eq!(grouped.body["meta"]["total"], 3);
    // One row without groupBy, the caller's filter first.
    let filter = encode(&json!({ "title": { "ilike": "%a%" } }).to_string());
    let all = aggregate(&format!(
        "aggregate={}&filter={filter}",
        encode("n:count(),avg:avg(score)")
    ))
    .await;
    assert_eq!(all.data()[0]["n"], 2, "Java and Orphan: {:?}", all.body);
    assert_eq!(all.data()[0]["avg"], Value::Null, "{:?}", all.body);
    // Aliases are the caller's to choose, `x` included.
    let x = aggregate(&format!("aggregate={}", encode("x:count()"))).await;
    assert_eq!(x.data(), &json!([{ "x": 3 }]), "{:?}", x.body);
    // Scores show on Ada's open posts only.
    let sum = aggregate(&format!("aggregate={}", encode("s:sum(score)"))).await;
    assert_eq!(sum.data(), &json!([{ "s": 5 }]));
    for (query, field) in [
        (format!("aggregate={}", encode("s:sum(title)")), "aggregate"),
        (format!("aggregate={}", encode("s:sum(nope)")), "aggregate"),
        (format!("aggregate={}", encode("s:median(id)")), "aggregate"),
        (
            format!("aggregate={}&select=id", encode("n:count()")),
            "select",
        ),
        (
            format!("aggregate={}&sort=title", encode("n:count()")),
            "sort",
        ),
        ("groupBy=status".to_owned(), "groupBy"),
    ] {
        let answer = aggregate(&query).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{query}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["errors"][0]["code"], "INVALID_QUERY");
        assert_eq!(answer.body["errors"][0]["field"], field, "{query}");
    }
}

#[tokio::test]
async fn search_matches_words_and_holds_in_grant_filters() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (_, posts, _) = blog(&app, &admin).await;
    let index = app
        .post(
            "/admin/api/schema/app/tables/posts/indexes",
            &admin,
            json!({ "data": { "columns": ["body"], "method": "search" } }),
        )
        .await;
    assert!(index.status.is_success(), "{:?}", index.body);
    let role = create_role(&app, &admin, "rustaceans").await;
    grant(
        &app,
        &admin,
        &role,
        &posts,
        "read",
        json!({ "body": { "search": "rust" } }),
        Value::Null,
    )
    .await;
    let (_, reader) = member(&app, &admin, "rust@x.test", &role).await;
    let find = |query: &str| {
        let filter = encode(&json!({ "body": { "search": query } }).to_string());
        let (app, reader) = (&app, reader.clone());
        async move {
            let answer = app
                .get(
                    &format!("/api/data/app/posts?filter={filter}&sort=id"),
                    &reader,
                )
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
            answer
                .data()
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_i64().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(find("web").await, vec![10]);
    assert_eq!(find("rust -java").await, vec![10]);
    assert_eq!(find("\"web server\"").await, vec![10]);
    assert_eq!(find("java or server").await, vec![10, 11]);
    let on_number = app
        .get(
            &format!(
                "/api/data/app/posts?filter={}",
                encode(r#"{"score":{"search":"5"}}"#)
            ),
            &reader,
        )
        .await;
    assert_eq!(on_number.status, StatusCode::BAD_REQUEST);
    assert_eq!(on_number.body["errors"][0]["code"], "INVALID_QUERY");
    // The search index serves the operator's expression.
    app.db
        .sql("CREATE FUNCTION public.search_plan() RETURNS text LANGUAGE plpgsql AS $$ \
              DECLARE line text; plan text := ''; BEGIN SET LOCAL enable_seqscan = off; \
              FOR line IN EXPLAIN SELECT id FROM app.posts AS r WHERE to_tsvector('simple', r.body) \
                @@ websearch_to_tsquery('simple', CAST('rust' AS text)) LOOP plan := plan || line; END LOOP; \
              RETURN plan; END $$")
        .await;
    let plan = app.db.sql("SELECT public.search_plan()").await.unwrap();
    assert!(plan.contains("posts_body_idx"), "{plan}");
}

#[tokio::test]
async fn upserts_need_both_grants_and_write_all_or_nothing() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (authors, _, _) = blog(&app, &admin).await;
    let role = create_role(&app, &admin, "editors").await;
    grant(
        &app,
        &admin,
        &role,
        &authors,
        "create",
        Value::Null,
        Value::Null,
    )
    .await;
    let (_, editor) = member(&app, &admin, "editor@x.test", &role).await;
    let upsert = |rows: Value, key: &str| {
        let (app, editor, key) = (&app, editor.clone(), key.to_owned());
        async move {
            app.post(
                &format!("/api/data/app/authors?onConflict={key}"),
                &editor,
                json!({ "data": rows }),
            )
            .await
        }
    };
    let no_update = upsert(json!({ "id": 1, "name": "Ada L" }), "id").await;
    assert_eq!(
        no_update.status,
        StatusCode::FORBIDDEN,
        "{:?}",
        no_update.body
    );
    // Updates reach red authors only, and never the team.
    grant(
        &app,
        &admin,
        &role,
        &authors,
        "update",
        json!({ "team": { "eq": "red" } }),
        json!(["id", "name", "email"]),
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &authors,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    let written = upsert(
        json!([
        { "id": 1, "name": "Ada L", "email": "ada@x.test" },
        { "id": 3, "name": "Cy", "email": "cy@x.test" }]),
        "id",
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{:?}", written.body);
    assert_eq!(
        written.data(),
        &json!([
        { "id": 1, "name": "Ada L", "email": "ada@x.test", "team": "red" },
        { "id": 3, "name": "Cy", "email": "cy@x.test", "team": null }])
    );
    // Bob is blue: nothing of the request is written.
    let blue = upsert(
        json!([{ "id": 4, "name": "Dee" }, { "id": 2, "name": "Bobby" }]),
        "id",
    )
    .await;
    assert_eq!(blue.status, StatusCode::FORBIDDEN, "{:?}", blue.body);
    let four = app.get("/api/data/app/authors/4", &admin).await;
    assert_eq!(four.status, StatusCode::NOT_FOUND);
    // A column the update grants leave out, a key that is not unique, the same row twice.
    let team = upsert(json!({ "id": 1, "name": "Ada", "team": "blue" }), "id").await;
    assert_eq!(team.status, StatusCode::BAD_REQUEST, "{:?}", team.body);
    assert_eq!(team.body["errors"][0]["field"], "team");
    let empty = upsert(json!({}), "id").await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{:?}", empty.body);
    assert_eq!(empty.body["errors"][0]["code"], "INVALID_PAYLOAD");
    let not_unique = upsert(json!({ "id": 1, "name": "Ada" }), "name").await;
    assert_eq!(not_unique.status, StatusCode::BAD_REQUEST);
    assert_eq!(not_unique.body["errors"][0]["code"], "INVALID_QUERY");
    assert_eq!(not_unique.body["errors"][0]["field"], "onConflict");
    let twice = upsert(
        json!([{ "id": 5, "name": "E" }, { "id": 5, "name": "F" }]),
        "id",
    )
    .await;
    assert_eq!(twice.status, StatusCode::BAD_REQUEST, "{:?}", twice.body);
    // A unique index other than the key serves too.
    let index = app
        .post(
            "/admin/api/schema/app/tables/authors/indexes",
            &admin,
            json!({ "data": { "columns": ["email"], "unique": true } }),
        )
        .await;
    assert!(index.status.is_success(), "{:?}", index.body);
    let by_email = upsert(
        json!({ "id": 9, "email": "cy@x.test", "name": "Cyrus" }),
        "email",
    )
    .await;
    assert_eq!(
        by_email.status,
        StatusCode::FORBIDDEN,
        "Cy has no team: {:?}",
        by_email.body
    );
    let by_email = upsert(
        json!({ "id": 1, "email": "ada@x.test", "name": "Ada" }),
        "email",
    )
    .await;
    assert_eq!(by_email.status, StatusCode::CREATED, "{:?}", by_email.body);
    assert_eq!(by_email.data()["name"], "Ada");
    let audit = app.get("/admin/api/audit?action=data.upsert", &admin).await;
    assert!(
        audit.data().as_array().is_some_and(|a| !a.is_empty()),
        "{:?}",
        audit.body
    );
}

#[tokio::test]
async fn a_batch_writes_everything_or_nothing_with_references() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let key =
        json!({ "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" });
    let orders = create_table(
        &app,
        &admin,
        "app",
        "orders",
        json!([key,
        { "name": "customer", "dataType": "text", "nullable": false }]),
    )
    .await;
    let items = create_table(&app, &admin, "app", "order_items", json!([key,
        { "name": "order_id", "dataType": "bigint", "foreignKey": { "targetTable": "orders", "targetColumn": "id" } },
        { "name": "sku", "dataType": "text" },
        { "name": "qty", "dataType": "integer", "check": "qty > 0", "checkMessage": "Quantities are positive" }])).await;
    let role = create_role(&app, &admin, "shop").await;
    for resource in [&orders, &items] {
        expose(&app, &admin, resource, &["GET", "POST", "PATCH", "DELETE"]).await;
        for action in ["read", "create", "update", "delete"] {
            grant(
                &app,
                &admin,
                &role,
                resource,
                action,
                Value::Null,
                Value::Null,
            )
            .await;
        }
    }
    let (_, shop) = member(&app, &admin, "shop@x.test", &role).await;
    let batch = |operations: Value| {
        let (app, shop) = (&app, shop.clone());
        async move {
            app.post("/api/batch", &shop, json!({ "data": operations }))
                .await
        }
    };
    let done = batch(json!([
        { "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "customer": "Ada" } } },
        { "method": "POST", "path": "/api/data/app/order_items",
          "body": { "data": [{ "order_id": "{{0.data.id}}", "sku": "A", "qty": 1 }, { "order_id": "{{0.data.id}}", "sku": "B", "qty": 2 }] } },
        { "method": "PATCH", "path": "/api/data/app/order_items/{{1.data.1.id}}", "body": { "data": { "qty": 3 } } },
        { "method": "GET", "path": "/api/data/app/orders/{{0.data.id}}",
          "query": { "select": "id,customer,items:app.order_items!order_id(sku,qty)" } },
        { "method": "DELETE", "path": "/api/data/app/order_items/{{1.data.0.id}}" },
        { "method": "GET", "path": "/api/data/app/order_items", "query": { "aggregate": "n:count()" } }
    ])).await;
    assert_eq!(done.status, StatusCode::OK, "{:?}", done.body);
    let answers = done.data().as_array().unwrap();
    let statuses: Vec<i64> = answers
        .iter()
        .map(|a| a["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![201, 201, 200, 200, 204, 200]);
    let order = answers[0]["data"]["id"].clone();
    assert_eq!(
        answers[3]["data"],
        json!({ "id": order, "customer": "Ada",
        "items": [{ "sku": "A", "qty": 1 }, { "sku": "B", "qty": 3 }] })
    );
    assert_eq!(answers[4]["data"], Value::Null);
    assert_eq!(answers[5]["data"], json!([{ "n": 1 }]));

    // Consecutive inserts into one table answer each operation its own rows.
    let merged = batch(json!([
        { "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "customer": "Cy" } } },
        { "method": "POST", "path": "/api/data/app/orders", "body": { "data": [{ "customer": "Di" }, { "customer": "Ed" }] } },
        { "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "customer": "Fa" } } }
    ])).await;
    assert_eq!(merged.status, StatusCode::OK, "{:?}", merged.body);
    let answers = merged.data().as_array().unwrap();
    assert_eq!(answers[0]["data"]["customer"], "Cy");
    assert_eq!(answers[1]["data"].as_array().unwrap().len(), 2);
    assert_eq!(answers[1]["data"][1]["customer"], "Ed");
    assert_eq!(answers[2]["data"]["customer"], "Fa");
    assert!(answers.iter().all(|a| a["status"] == 201));

    // The third operation breaks a check: nothing of the batch is written.
    let count = || async {
        app.get("/api/data/app/orders?aggregate=n:count()", &shop)
            .await
            .data()[0]["n"]
            .clone()
    };
    let before = count().await;
    let refused = batch(json!([
        { "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "customer": "Bob" } } },
        { "method": "POST", "path": "/api/data/app/order_items", "body": { "data": { "order_id": "{{0.data.id}}", "qty": 1 } } },
        { "method": "POST", "path": "/api/data/app/order_items", "body": { "data": { "order_id": "{{0.data.id}}", "qty": 0 } } }
    ])).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.body["errors"][0]["code"], "CHECK_VIOLATION");
    assert_eq!(refused.body["meta"]["index"], 2);
    assert_eq!(count().await, before);
    let missing = batch(json!([
        { "method": "DELETE", "path": "/api/data/app/orders/999999" }
    ]))
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{:?}", missing.body);
    assert_eq!(missing.body["meta"]["index"], 0);

    // Bad operations are 400 INVALID_PAYLOAD on their field, before anything runs.
    for (operations, field) in [
        (
            json!([{ "method": "GET", "path": "/admin/api/users" }]),
            "[0].path",
        ),
        (
            json!([{ "method": "PUT", "path": "/api/data/app/orders/1" }]),
            "[0].method",
        ),
        (
            json!([{ "method": "GET", "path": "/api/data/app/orders" },
                { "method": "GET", "path": "/api/data/app/orders/{{1.data.id}}" }]),
            "[1].path",
        ),
        (
            json!([{ "method": "POST", "path": "/api/data/app/orders", "body": { "data": { "customer": "{{5.data.x}}" } } }]),
            "[0].body.data.customer",
        ),
        (json!([]), "data"),
    ] {
        let answer = batch(operations.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{operations}: {:?}",
            answer.body
        );
        assert_eq!(
            answer.body["errors"][0]["code"], "INVALID_PAYLOAD",
            "{operations}"
        );
        assert_eq!(answer.body["errors"][0]["field"], field, "{operations}");
    }
    assert_eq!(count().await, before);
    // Without a grant the operation is refused like its route.
    let stranger = create_role(&app, &admin, "nothing").await;
    let (_, nobody) = member(&app, &admin, "nobody@x.test", &stranger).await;
    let denied = app
        .post(
            "/api/batch",
            &nobody,
            json!({ "data": [{ "method": "GET", "path": "/api/data/app/orders" }] }),
        )
        .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{:?}", denied.body);
    assert_eq!(denied.body["meta"]["index"], 0);
}

#[tokio::test]
async fn mcp_queries_take_the_same_embeds_and_aggregates() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (authors, posts, _) = blog(&app, &admin).await;
    crate::mcp::enable(&app, &admin).await;
    let role = create_role(&app, &admin, "agents").await;
    grant(
        &app,
        &admin,
        &role,
        &posts,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    grant(
        &app,
        &admin,
        &role,
        &authors,
        "read",
        json!({ "team": { "eq": "red" } }),
        json!(["id", "name"]),
    )
    .await;
    let (_, agent) = member(&app, &admin, "agent@x.test", &role).await;
    let mut client = crate::mcp::Client::new(&app, &agent);
    client.initialize().await;
    let (failed, text) = client
        .call("query_rows", json!({ "resource": "app.posts", "select": "id,author:author_id(*)", "sort": "id", "limit": 2 }))
        .await;
    assert!(!failed, "{text}");
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        page["rows"],
        json!([{ "id": 10, "author": { "id": 1, "name": "Ada" } },
        { "id": 11, "author": null }])
    );
    let (failed, text) = client
        .call("query_rows", json!({ "resource": "app.posts", "aggregate": "n:count(),best:max(score)", "groupBy": "status", "sort": "status" }))
        .await;
    assert!(!failed, "{text}");
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        page["rows"],
        json!([{ "status": "closed", "n": 1, "best": 7 }, { "status": "open", "n": 3, "best": 5 }])
    );
    let (failed, text) = client
        .call(
            "get_row",
            json!({ "resource": "app.posts", "id": 12, "select": "title,author:author_id(name)" }),
        )
        .await;
    assert!(!failed, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({ "title": "Closed", "author": { "name": "Ada" } })
    );
}

/// Random read grants (row filters, column limits, two grants masking each
/// other's columns) on the three tables: every embed equals what the same
/// caller reads of that table by itself, and every aggregate what the test
/// computes over the caller's own list.
#[tokio::test]
async fn embeds_and_aggregates_match_plain_reads_under_random_grants() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (authors, posts, comments) = blog(&app, &admin).await;
    let mut rng = crate::data::Lcg(0x5eed_0039);
    let words = ["rust", "java", "web", "server"];
    let (mut post_rows, mut comment_rows) = (Vec::new(), Vec::new());
    for id in 20..40 {
        let author = if rng.next(5) == 0 {
            Value::Null
        } else {
            json!(1 + rng.next(2))
        };
        let score = if rng.next(4) == 0 {
            Value::Null
        } else {
            json!(rng.next(10))
        };
        let body = format!("{} {}", rng.pick(&words), rng.pick(&words));
        post_rows.push(
            json!({ "id": id, "author_id": author, "title": format!("t{id}"), "body": body,
            "score": score, "status": *rng.pick(&["open", "closed"]) }),
        );
    }
    for id in 200..260 {
        comment_rows.push(
            json!({ "id": id, "post_id": 20 + rng.next(20), "author_id": 1 + rng.next(2),
            "text": format!("c{id}"), "approved": rng.next(2) == 0 }),
        );
    }
    for (path, rows) in [
        ("/api/data/app/posts", post_rows),
        ("/api/data/app/comments", comment_rows),
    ] {
        let answer = app.post(path, &admin, json!({ "data": rows })).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    }
    let tables = [
        (
            &authors,
            vec!["name", "email", "team"],
            vec![
                json!({ "team": { "eq": "red" } }),
                json!({ "team": { "neq": "blue" } }),
                json!({ "id": { "lte": 1 } }),
                Value::Null,
            ],
        ),
        (
            &posts,
            vec!["author_id", "title", "body", "score", "status"],
            vec![
                json!({ "status": { "eq": "open" } }),
                json!({ "score": { "gte": 4 } }),
                json!({ "body": { "search": "rust" } }),
                Value::Null,
            ],
        ),
        (
            &comments,
            vec!["post_id", "author_id", "text", "approved"],
            vec![
                json!({ "approved": { "eq": true } }),
                json!({ "author_id": { "eq": 2 } }),
                json!({ "id": { "gt": 230 } }),
                Value::Null,
            ],
        ),
    ];
    let (mut embeds_compared, mut groups_compared) = (0, 0);
    for round in 0..8 {
        let role = create_role(&app, &admin, &format!("random {round}")).await;
        for (resource, columns, filters) in &tables {
            for _ in 0..1 + rng.next(2) {
                let mut chosen = vec!["id"];
                chosen.extend(columns.iter().filter(|_| rng.next(3) > 0));
                grant(
                    &app,
                    &admin,
                    &role,
                    resource,
                    "read",
                    rng.pick(filters).clone(),
                    json!(chosen),
                )
                .await;
            }
        }
        let (_, caller) = member(&app, &admin, &format!("random{round}@x.test"), &role).await;
        let list = |path: &str| {
            let (app, caller, path) = (&app, caller.clone(), path.to_owned());
            async move {
                let answer = app.get(&path, &caller).await;
                assert_eq!(answer.status, StatusCode::OK, "{path}: {:?}", answer.body);
                answer.data().as_array().unwrap().clone()
            }
        };
        let own_authors = list("/api/data/app/authors?limit=1000").await;
        let own_comments = list("/api/data/app/comments?limit=1000&sort=id").await;
        let own_posts = list("/api/data/app/posts?limit=1000&sort=id").await;
        let readable = |rows: &[Value], column: &str| rows.iter().any(|r| r.get(column).is_some());
        let select = encode("*,author:author_id(*),comments:app.comments!post_id(*)");
        let embedded = app
            .get(
                &format!("/api/data/app/posts?select={select}&limit=1000&sort=id"),
                &caller,
            )
            .await;
        if !own_posts.is_empty() && !readable(&own_posts, "author_id") {
            assert_eq!(
                embedded.status,
                StatusCode::BAD_REQUEST,
                "{:?}",
                embedded.body
            );
        } else {
            assert_eq!(embedded.status, StatusCode::OK, "{:?}", embedded.body);
            let rows = embedded.data().as_array().unwrap();
            assert_eq!(rows.len(), own_posts.len());
            embeds_compared += rows.len();
            for (row, plain) in rows.iter().zip(&own_posts) {
                for (key, value) in plain.as_object().unwrap() {
                    assert_eq!(&row[key], value, "round {round}: {key} of {plain}");
                }
                let author = own_authors
                    .iter()
                    .find(|a| !row["author_id"].is_null() && a.get("id") == Some(&row["author_id"]))
                    .cloned()
                    .unwrap_or(Value::Null);
                assert_eq!(row["author"], author, "round {round}: author of {row}");
                let mine: Vec<&Value> = own_comments
                    .iter()
                    .filter(|c| !row["id"].is_null() && c.get("post_id") == Some(&row["id"]))
                    .collect();
                assert_eq!(
                    row["comments"],
                    json!(mine),
                    "round {round}: comments of post {}",
                    row["id"]
                );
            }
        }
        let query = format!(
            "aggregate={}&groupBy=status&limit=1000",
            encode("n:count(),total:sum(score),top:max(score),titles:count(title)")
        );
        let grouped = app
            .get(&format!("/api/data/app/posts?{query}"), &caller)
            .await;
        let needs = ["status", "score", "title"];
        if !own_posts.is_empty() && needs.iter().any(|c| !readable(&own_posts, c)) {
            assert_eq!(
                grouped.status,
                StatusCode::BAD_REQUEST,
                "{:?}",
                grouped.body
            );
            continue;
        }
        assert_eq!(grouped.status, StatusCode::OK, "{:?}", grouped.body);
        for group in grouped.data().as_array().unwrap() {
            groups_compared += 1;
            let members: Vec<&Value> = own_posts
                .iter()
                .filter(|p| p["status"] == group["status"])
                .collect();
            let scores: Vec<i64> = members.iter().filter_map(|p| p["score"].as_i64()).collect();
            assert_eq!(group["n"], json!(members.len()), "round {round}: {group}");
            assert_eq!(
                group["titles"],
                json!(members.iter().filter(|p| !p["title"].is_null()).count())
            );
            assert_eq!(
                group["total"],
                if scores.is_empty() {
                    Value::Null
                } else {
                    json!(scores.iter().sum::<i64>())
                }
            );
            assert_eq!(
                group["top"],
                scores.iter().max().map_or(Value::Null, |m| json!(m))
            );
        }
        let groups: std::collections::BTreeSet<String> =
            own_posts.iter().map(|p| p["status"].to_string()).collect();
        assert_eq!(
            grouped.data().as_array().unwrap().len(),
            groups.len(),
            "round {round}"
        );
    }
    assert!(
        embeds_compared > 20 && groups_compared > 2,
        "{embeds_compared} {groups_compared}"
    );
}

/// A list with embeds is one statement: with the embedded table locked,
/// the request waits in a statement that reads the listed table and every
/// embedded one, and answers once the lock is gone.
#[tokio::test]
async fn a_list_with_embeds_is_one_statement() {
    use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    blog(&app, &admin).await;
    let db = sea_orm::Database::connect(&app.db.url).await.unwrap();
    // Warm the catalog, so the request's only statement is the read.
    let select = encode("id,author:author_id(name),comments:app.comments!post_id(text)");
    let path = format!("{}/api/data/app/posts?select={select}", app.address);
    let warm = app
        .client
        .get(&path)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(warm.status(), StatusCode::OK);
    let lock = db.begin().await.unwrap();
    lock.execute_unprepared("LOCK TABLE app.comments IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let request = tokio::spawn(app.client.get(&path).bearer_auth(&admin).send());
    let waiting = "SELECT string_agg(query, ' | ') FROM pg_stat_activity \
        WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let statement = loop {
        let row = db
            .query_one_raw(Statement::from_string(DbBackend::Postgres, waiting))
            .await
            .unwrap()
            .unwrap();
        if let Some(text) = row.try_get_by_index::<Option<String>>(0).unwrap() {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no statement waited for the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(
        !statement.contains(" | "),
        "one statement waits: {statement}"
    );
    for table in ["\"posts\"", "\"authors\"", "\"comments\""] {
        assert!(statement.contains(table), "{table} not in {statement}");
    }
    lock.rollback().await.unwrap();
    let answer = request.await.unwrap().unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    db.close().await.unwrap();
}
