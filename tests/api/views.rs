//! DataViews and dashboards: definitions checked when saved, published
//! snapshots, buckets in each caller's zone, aggregates, grants on the view
//! and on its source, previews, dashboards with per-widget refusals.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{Answer, TestApp, spawn_app};

use crate::data::{create_role, create_table, encode, grant, member};

/// (UTC instant, amount in cents, team) of the sales rows: around the end
/// of Auckland's daylight saving time (2026-04-05 03:00 NZDT), and one in
/// March that the views' filter leaves out.
const SALES: [(&str, i64, &str); 8] = [
    ("2026-03-20T12:00:00Z", 999, "red"),
    ("2026-04-04T10:30:00Z", 1050, "red"),
    ("2026-04-04T11:30:00Z", 200, "blue"),
    ("2026-04-05T11:30:00Z", 325, "red"),
    ("2026-04-05T12:30:00Z", 1000, "blue"),
    ("2026-04-06T06:00:00Z", 75, "red"),
    ("2026-04-06T08:00:00Z", 400, "red"),
    ("2026-04-13T08:00:00Z", 1234, "blue"),
];

/// The sales table with [`SALES`]; answers its resource id.
async fn sales(app: &TestApp, admin: &str) -> String {
    let resource = create_table(
        app,
        admin,
        "app",
        "sales",
        json!([
            { "name": "id", "dataType": "bigint", "primaryKey": true, "identity": "ALWAYS" },
            { "name": "at", "dataType": "timestamptz", "nullable": false },
            { "name": "amount", "dataType": "numeric(10,2)", "nullable": false },
            { "name": "team", "dataType": "text", "nullable": false },
            { "name": "note", "dataType": "text" },
        ]),
    )
    .await;
    let values: Vec<String> = SALES
        .iter()
        .map(|(at, cents, team)| format!("('{at}', {cents} / 100.0, '{team}')"))
        .collect();
    app.db
        .sql(&format!(
            "INSERT INTO app.sales (at, amount, team) VALUES {}",
            values.join(", ")
        ))
        .await;
    resource
}

/// Creates a DataView; answers its id.
async fn create_view(app: &TestApp, admin: &str, body: Value) -> String {
    let answer = app
        .post("/admin/api/dataviews", admin, json!({ "data": body }))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.data()["published"], json!(false));
    answer.data()["id"].as_str().unwrap().to_owned()
}

async fn publish(app: &TestApp, admin: &str, id: &str) {
    let answer = app
        .post(
            &format!("/admin/api/dataviews/{id}/publish"),
            admin,
            json!({}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.data()["published"], json!(true));
}

/// `GET path` with a bearer and, when given, an `X-Service-Timezone` header.
async fn get_in(app: &TestApp, path: &str, bearer: &str, zone: Option<&str>) -> Answer {
    let mut request = app
        .client
        .get(format!("{}{path}", app.address))
        .bearer_auth(bearer);
    if let Some(zone) = zone {
        request = request.header("X-Service-Timezone", zone);
    }
    TestApp::answer(request.send().await.unwrap()).await
}

fn per_day() -> Value {
    json!({ "slug": "sales-per-day", "name": "Sales per day", "source": "app.sales",
        "columns": [ { "name": "day", "bucket": "day", "column": "at" },
                     { "name": "total", "agg": "sum", "column": "amount" },
                     { "name": "count", "agg": "count" } ],
        "filter": { "at": { "gte": "2026-04-01T00:00:00Z" } },
        "sort": ["day"], "limit": 1000 })
}

/// Lets `role` read the sales of the red team only; answers their April
/// total in cents.
async fn grant_red_team(app: &TestApp, admin: &str, role: &str, resource: &str) -> i64 {
    grant(
        app,
        admin,
        role,
        resource,
        "read",
        json!({ "team": { "eq": "red" } }),
        Value::Null,
    )
    .await;
    SALES
        .iter()
        .skip(1)
        .filter(|s| s.2 == "red")
        .map(|s| s.1)
        .sum()
}

/// Cents as the JSON number of a numeric sum.
fn cents(value: &Value) -> i64 {
    (value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
        * 100.0)
        .round() as i64
}

/// Per local day of `zone`: (the day's start as RFC 3339, sum in cents,
/// count) of the April rows, computed here.
fn expected_days(zone: Tz) -> Vec<(String, i64, i64)> {
    let mut days: BTreeMap<NaiveDate, (i64, i64)> = BTreeMap::new();
    for (at, amount, _) in SALES.iter().skip(1) {
        let instant: DateTime<Utc> = at.parse().unwrap();
        let day = instant.with_timezone(&zone).date_naive();
        let entry = days.entry(day).or_default();
        entry.0 += amount;
        entry.1 += 1;
    }
    days.into_iter()
        .map(|(day, (sum, count))| {
            let start = zone
                .from_local_datetime(&day.and_hms_opt(0, 0, 0).unwrap())
                .earliest()
                .unwrap();
            (start.to_rfc3339(), sum, count)
        })
        .collect()
}

/// (day, total in cents, count) of each row of a view's answer.
fn days_of(answer: &Answer) -> Vec<(String, i64, i64)> {
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    days_in(answer.data())
}

/// (day, total in cents, count) of each of `rows`.
fn days_in(rows: &Value) -> Vec<(String, i64, i64)> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["day"].as_str().unwrap().to_owned(),
                cents(&row["total"]),
                row["count"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn day_buckets_are_cut_in_the_callers_zone_across_daylight_saving() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sales(&app, &admin).await;
    let id = create_view(&app, &admin, per_day()).await;
    publish(&app, &admin, &id).await;
    let read = |zone: &'static str| get_in(&app, "/api/views/sales-per-day", &admin, Some(zone));
    let auckland = days_of(&read("Pacific/Auckland").await);
    let los_angeles = days_of(&read("America/Los_Angeles").await);
    assert_eq!(auckland, expected_days(Tz::Pacific__Auckland));
    assert_eq!(los_angeles, expected_days(Tz::America__Los_Angeles));
    // The same rows fall on different days, and Auckland's offset changes
    // between the 5th (+13:00) and the 6th (+12:00).
    assert_ne!(auckland, los_angeles);
    assert!(auckland.iter().any(|d| d.0 == "2026-04-05T00:00:00+13:00"));
    assert!(auckland.iter().any(|d| d.0 == "2026-04-06T00:00:00+12:00"));
    assert!(
        los_angeles
            .iter()
            .any(|d| d.0 == "2026-04-05T00:00:00-07:00")
    );

    // The request's filter, sort, page and count apply over the output.
    let filter = encode(r#"{"count":{"gte":2}}"#);
    let page = get_in(
        &app,
        &format!("/api/views/sales-per-day?filter={filter}&sort=-day&limit=1&offset=1&count=exact"),
        &admin,
        Some("Pacific/Auckland"),
    )
    .await;
    let busy: Vec<_> = expected_days(Tz::Pacific__Auckland)
        .into_iter()
        .filter(|d| d.2 >= 2)
        .rev()
        .collect();
    assert_eq!(days_of(&page), busy[1..2].to_vec());
    assert_eq!(page.body["meta"]["total"], json!(busy.len()));
    assert_eq!(page.body["meta"]["limit"], json!(1));
    let bad = get_in(
        &app,
        &format!(
            "/api/views/sales-per-day?filter={}",
            encode(r#"{"amount":{"gt":1}}"#)
        ),
        &admin,
        None,
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{:?}", bad.body);
    assert_eq!(bad.code(), "INVALID_QUERY");
}

#[tokio::test]
async fn every_aggregate_and_bucket_matches_values_computed_here() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sales(&app, &admin).await;
    app.db
        .sql("UPDATE app.sales SET note = 'x' WHERE team = 'red' AND amount > 5")
        .await;
    let id = create_view(
        &app,
        &admin,
        json!({ "slug": "by-team", "name": "By team", "source": "app.sales",
        "columns": [ { "name": "team", "column": "team" },
                     { "name": "month", "bucket": "month", "column": "at" },
                     { "name": "n", "agg": "count" },
                     { "name": "notes", "agg": "count", "column": "note" },
                     { "name": "total", "agg": "sum", "column": "amount" },
                     { "name": "mean", "agg": "avg", "column": "amount" },
                     { "name": "least", "agg": "min", "column": "amount" },
                     { "name": "most", "agg": "max", "column": "amount" },
                     { "name": "first", "agg": "min", "column": "at" },
                     { "name": "last_team", "agg": "max", "column": "team" } ],
        "sort": ["team", "month"] }),
    )
    .await;
    publish(&app, &admin, &id).await;
    let answer = get_in(&app, "/api/views/by-team", &admin, Some("UTC")).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let rows = answer.data().as_array().unwrap();
    let mut groups: BTreeMap<(&str, String), Vec<(i64, &str)>> = BTreeMap::new();
    for (at, amount, team) in SALES {
        groups
            .entry((team, at[..7].to_owned()))
            .or_default()
            .push((amount, at));
    }
    assert_eq!(rows.len(), groups.len(), "{rows:?}");
    for (row, ((team, month), values)) in rows.iter().zip(&groups) {
        let amounts: Vec<i64> = values.iter().map(|v| v.0).collect();
        let sum: i64 = amounts.iter().sum();
        assert_eq!(row["team"], json!(team));
        assert_eq!(row["month"], json!(format!("{month}-01T00:00:00+00:00")));
        assert_eq!(row["n"], json!(values.len()));
        let noted = if *team == "red" {
            amounts.iter().filter(|a| **a > 500).count()
        } else {
            0
        };
        assert_eq!(row["notes"], json!(noted));
        assert_eq!(cents(&row["total"]), sum);
        let mean = sum as f64 / amounts.len() as f64 / 100.0;
        assert!((row["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{row}");
        assert_eq!(cents(&row["least"]), *amounts.iter().min().unwrap());
        assert_eq!(cents(&row["most"]), *amounts.iter().max().unwrap());
        let first: DateTime<Utc> = values.iter().map(|v| v.1).min().unwrap().parse().unwrap();
        let shown: DateTime<Utc> = row["first"].as_str().unwrap().parse().unwrap();
        assert_eq!(shown, first);
        assert_eq!(row["last_team"], json!(team));
    }

    // Weeks start on Monday: 2026-04-06 and 2026-04-13 are Mondays.
    let weeks = create_view(&app, &admin, json!({ "slug": "weeks", "name": "Weeks", "source": "app.sales",
        "columns": [ { "name": "week", "bucket": "week", "column": "at" }, { "name": "n", "agg": "count" } ],
        "sort": ["week"] })).await;
    publish(&app, &admin, &weeks).await;
    let answer = get_in(&app, "/api/views/weeks", &admin, Some("UTC")).await;
    let starts: Vec<&str> = answer
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["week"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "2026-03-16T00:00:00+00:00",
            "2026-03-30T00:00:00+00:00",
            "2026-04-06T00:00:00+00:00",
            "2026-04-13T00:00:00+00:00"
        ]
    );
}

#[tokio::test]
async fn readers_need_grants_on_the_view_and_its_source_whose_filters_apply() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = sales(&app, &admin).await;
    let id = create_view(&app, &admin, per_day()).await;
    publish(&app, &admin, &id).await;
    let role = create_role(&app, &admin, "Analysts").await;
    let (_, reader) = member(&app, &admin, "analyst@example.com", &role).await;
    let path = "/api/views/sales-per-day";
    let read = || get_in(&app, path, &reader, Some("UTC"));

    // No grant on the view: refused, as without one on the source.
    assert_eq!(read().await.code(), "PERMISSION_DENIED");
    let view_grant = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": role, "dataViewId": id, "action": "read" } }),
        )
        .await;
    assert_eq!(
        view_grant.status,
        StatusCode::CREATED,
        "{:?}",
        view_grant.body
    );
    assert_eq!(view_grant.data()["dataViewId"], json!(id));
    let denied = read().await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{:?}", denied.body);
    assert_eq!(denied.code(), "PERMISSION_DENIED");

    // A row filter on the source hides rows from the aggregate; the source
    // needs no exposure.
    let red = grant_red_team(&app, &admin, &role, &resource).await;
    let rows = days_of(&read().await);
    assert_eq!(rows.iter().map(|r| r.1).sum::<i64>(), red);
    assert_eq!(
        rows.iter().map(|r| r.2).sum::<i64>(),
        SALES.iter().skip(1).filter(|s| s.2 == "red").count() as i64
    );

    // A view grant's filter is over the output columns.
    let narrow = create_role(&app, &admin, "Busy days").await;
    let (_, busy) = member(&app, &admin, "busy@example.com", &narrow).await;
    grant(
        &app,
        &admin,
        &narrow,
        &resource,
        "read",
        Value::Null,
        json!(["id", "at", "team"]),
    )
    .await;
    let filtered = app
        .post(
            "/admin/api/grants",
            &admin,
            json!({ "data": { "roleId": narrow, "dataViewId": id, "action": "read",
                              "filter": { "count": { "gte": 2 } } } }),
        )
        .await;
    assert_eq!(filtered.status, StatusCode::CREATED, "{:?}", filtered.body);
    let answer = get_in(&app, path, &busy, Some("UTC")).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let rows = answer.data().as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        assert!(row["count"].as_i64().unwrap() >= 2, "{row}");
        // amount is outside this role's columns: it sums as null.
        assert_eq!(row["total"], Value::Null);
    }

    // The role's OpenAPI document lists the view with its output types.
    let document = app
        .get(&format!("/admin/api/openapi/data?role={role}"), &admin)
        .await;
    assert_eq!(document.status, StatusCode::OK);
    assert!(document.body["paths"]["/api/views/sales-per-day"]["get"].is_object());
    let row = &document.body["components"]["schemas"]["View.sales-per-day"]["properties"];
    assert_eq!(row["day"]["format"], json!("date-time"));
    assert_eq!(row["count"]["type"], json!(["integer", "null"]));
    let other = create_role(&app, &admin, "Outsiders").await;
    let document = app
        .get(&format!("/admin/api/openapi/data?role={other}"), &admin)
        .await;
    assert!(
        document.body["paths"]
            .get("/api/views/sales-per-day")
            .is_none()
    );

    // Grants on views are checked: read only, filters over output columns.
    for (body, field) in [
        (
            json!({ "roleId": role, "dataViewId": id, "action": "create" }),
            "action",
        ),
        (
            json!({ "roleId": role, "dataViewId": id, "action": "read", "filter": { "amount": { "gt": 1 } } }),
            "filter",
        ),
        (
            json!({ "roleId": role, "dataViewId": id, "resourceId": resource, "action": "read" }),
            "resourceId",
        ),
        (
            json!({ "roleId": role, "dataViewId": uuid::Uuid::now_v7(), "action": "read" }),
            "dataViewId",
        ),
        (
            json!({ "roleId": role, "dataViewId": id, "action": "read", "columns": ["day"] }),
            "columns",
        ),
    ] {
        let answer = app
            .post("/admin/api/grants", &admin, json!({ "data": body }))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{body}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["errors"][0]["field"], json!(field), "{body}");
    }
}

#[tokio::test]
async fn only_published_snapshots_are_served_and_on_every_instance() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sales(&app, &admin).await;
    let peer = app.spawn_peer().await;
    let id = create_view(&app, &admin, per_day()).await;
    let read = |address: String| {
        let app = &app;
        let admin = admin.clone();
        async move {
            let request = app
                .client
                .get(format!("{address}/api/views/sales-per-day"))
                .bearer_auth(admin);
            TestApp::answer(request.send().await.unwrap()).await
        }
    };
    assert_eq!(read(app.address.clone()).await.code(), "NOT_FOUND");
    assert_eq!(
        get_in(&app, "/api/views/nothing-here", &admin, None)
            .await
            .code(),
        "NOT_FOUND"
    );
    publish(&app, &admin, &id).await;
    let first = read(peer.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    assert!(first.data()[0].get("total").is_some());

    // A changed draft is served only once published, then at once by both instances.
    let patch = app
        .patch(
            &format!("/admin/api/dataviews/{id}"),
            &admin,
            json!({ "data": { "columns": [ { "name": "day", "bucket": "day", "column": "at" },
                                           { "name": "biggest", "agg": "max", "column": "amount" } ] } }),
        )
        .await;
    assert_eq!(patch.status, StatusCode::OK, "{:?}", patch.body);
    assert_eq!(patch.data()["sort"], json!(["day"]));
    assert!(read(peer.clone()).await.data()[0].get("total").is_some());
    publish(&app, &admin, &id).await;
    for address in [peer.clone(), app.address.clone()] {
        let row = read(address).await.data()[0].clone();
        assert!(
            row.get("total").is_none() && row.get("biggest").is_some(),
            "{row}"
        );
    }

    // Deleted: gone everywhere, its grants with it.
    let gone = app
        .delete(&format!("/admin/api/dataviews/{id}"), &admin)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(read(peer).await.code(), "NOT_FOUND");
    let audit = app
        .get("/admin/api/audit?action=dataview.publish", &admin)
        .await;
    assert_eq!(
        audit.data().as_array().unwrap().len(),
        2,
        "{:?}",
        audit.body
    );
}

#[tokio::test]
async fn a_preview_shows_the_statement_that_runs_with_its_rows() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sales(&app, &admin).await;
    let id = create_view(&app, &admin, per_day()).await;
    let preview = app
        .post(
            &format!("/admin/api/dataviews/{id}/preview"),
            &admin,
            json!({}),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{:?}", preview.body);
    let sql = preview.data()["sql"].as_str().unwrap().to_owned();
    let params = preview.data()["params"].as_array().unwrap().clone();
    let rows = preview.data()["rows"].clone();
    assert!(sql.contains("date_trunc('day'"), "{sql}");
    assert!(
        !sql.contains("Etc/UTC") && !sql.contains("2026-04-01"),
        "values are bound: {sql}"
    );
    // The statement, run here with its values, gives the same rows.
    let mut text = sql.clone();
    for (i, value) in params.iter().enumerate().rev() {
        let literal = match value {
            Value::String(s) => format!("'{}'", s.replace('\'', "''")),
            other => other.to_string(),
        };
        text = text.replace(&format!("${}", i + 1), &literal);
    }
    let body = app
        .db
        .sql(&format!("SELECT body FROM ({text}) AS preview"))
        .await
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), rows);
    // And the published view answers the administrator the same rows.
    publish(&app, &admin, &id).await;
    let served = get_in(&app, "/api/views/sales-per-day", &admin, None).await;
    assert_eq!(served.data(), &rows);
}

/// The builder's live preview: a definition never saved runs as the
/// administrator in a chosen zone, then as a member of a role, whose read
/// grants on the source (row filters included) apply; nothing is saved.
#[tokio::test]
async fn an_unsaved_definition_previews_as_a_role_in_a_zone() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let resource = sales(&app, &admin).await;
    let role = create_role(&app, &admin, "Analysts").await;
    let (_, reader) = member(&app, &admin, "analyst@example.com", &role).await;
    let preview = |query: String, body: Value| {
        let app = &app;
        let admin = &admin;
        async move {
            app.post(
                &format!("/admin/api/dataviews/preview{query}"),
                admin,
                json!({ "data": body }),
            )
            .await
        }
    };
    let days = |answer: &Answer| {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        days_in(&answer.data()["rows"])
    };

    let auckland = preview("?zone=Pacific/Auckland".into(), per_day()).await;
    assert_eq!(days(&auckland), expected_days(chrono_tz::Pacific::Auckland));
    let utc = preview("?zone=UTC".into(), per_day()).await;
    assert_eq!(days(&utc), expected_days(chrono_tz::UTC));

    // As the role: no read grant on the source, refused as a reader is.
    let as_role = format!("?roleId={role}&zone=UTC");
    let denied = preview(as_role.clone(), per_day()).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{:?}", denied.body);
    assert_eq!(denied.code(), "PERMISSION_DENIED");
    let red = grant_red_team(&app, &admin, &role, &resource).await;
    let rows = days(&preview(as_role.clone(), per_day()).await);
    assert_eq!(rows.iter().map(|r| r.1).sum::<i64>(), red);
    // The administrator's preview of the same definition sees every team.
    let all: i64 = SALES.iter().skip(1).map(|s| s.1).sum();
    assert_eq!(days(&utc).iter().map(|r| r.1).sum::<i64>(), all);

    // Refusals: a definition that does not fit, a zone, a role unknown.
    let mut wrong = per_day();
    wrong["columns"][1]["column"] = json!("nope");
    let refused = preview(String::new(), wrong).await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        refused.body
    );
    assert_eq!(refused.code(), "INVALID_PAYLOAD");
    let zone = preview("?zone=Mars/Olympus".into(), per_day()).await;
    assert_eq!(zone.status, StatusCode::BAD_REQUEST, "{:?}", zone.body);
    assert_eq!(zone.code(), "INVALID_QUERY");
    let unknown = preview(format!("?roleId={}", uuid::Uuid::new_v4()), per_day()).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{:?}", unknown.body);
    // Administrators only; and nothing was saved.
    let member_asks = app
        .post(
            "/admin/api/dataviews/preview",
            &reader,
            json!({ "data": per_day() }),
        )
        .await;
    assert_eq!(member_asks.status, StatusCode::FORBIDDEN);
    let saved = app.get("/admin/api/dataviews", &admin).await;
    assert_eq!(saved.data(), &json!([]));
}

#[tokio::test]
async fn definitions_are_checked_against_their_source_when_saved() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    sales(&app, &admin).await;
    let base = per_day();
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        if key == "columns" {
            body["sort"] = json!([]);
        }
        body[key] = value;
        body
    };
    let cases = [
        (with("source", json!("app.nothing")), "source"),
        (with("columns", json!([])), "columns"),
        (
            with("columns", json!([ { "name": "x", "column": "nope" } ])),
            "columns[0].column",
        ),
        (
            with(
                "columns",
                json!([ { "name": "x", "agg": "sum", "column": "team" } ]),
            ),
            "columns[0].agg",
        ),
        (
            with(
                "columns",
                json!([ { "name": "x", "bucket": "day", "column": "team" } ]),
            ),
            "columns[0].bucket",
        ),
        (
            with(
                "columns",
                json!([ { "name": "x", "agg": "count" }, { "name": "x", "column": "team" } ]),
            ),
            "columns[1].name",
        ),
        (with("sort", json!(["nope"])), "sort[0]"),
        (with("slug", json!("Not A Slug")), "slug"),
        (with("filter", json!({ "nope": { "eq": 1 } })), "filter"),
    ];
    for (body, field) in cases {
        let answer = app
            .post("/admin/api/dataviews", &admin, json!({ "data": body }))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{body}: {:?}",
            answer.body
        );
        assert_eq!(answer.code(), "INVALID_PAYLOAD");
        assert_eq!(answer.body["errors"][0]["field"], json!(field), "{body}");
    }
    let id = create_view(&app, &admin, base.clone()).await;
    let taken = app
        .post("/admin/api/dataviews", &admin, json!({ "data": base }))
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{:?}", taken.body);
    let patch = app
        .patch(
            &format!("/admin/api/dataviews/{id}"),
            &admin,
            json!({ "data": { "columns": [ { "name": "t", "agg": "avg", "column": "team" } ], "sort": [] } }),
        )
        .await;
    assert_eq!(patch.body["errors"][0]["field"], json!("columns[0].agg"));
    let listed = app.get("/admin/api/dataviews", &admin).await;
    assert_eq!(listed.data()[0]["columns"], per_day()["columns"]);
    let one = app.get(&format!("/admin/api/dataviews/{id}"), &admin).await;
    assert_eq!(one.data()["slug"], json!("sales-per-day"));
    assert_eq!(one.data()["filter"], per_day()["filter"]);
    assert_eq!(
        app.get(
            &format!("/admin/api/dataviews/{}", uuid::Uuid::now_v7()),
            &admin
        )
        .await
        .code(),
        "NOT_FOUND"
    );
}

/// A dashboard of every widget type over two views `role` may read, and a
/// widget over a third view it may not.
pub(crate) async fn sales_dashboard(app: &TestApp, admin: &str) -> (String, String) {
    let resource = sales(app, admin).await;
    let days = create_view(app, admin, per_day()).await;
    publish(app, admin, &days).await;
    let teams = create_view(app, admin, json!({ "slug": "teams", "name": "Teams", "source": "app.sales",
        "columns": [ { "name": "team", "column": "team" }, { "name": "total", "agg": "sum", "column": "amount" } ],
        "sort": ["team"] })).await;
    publish(app, admin, &teams).await;
    let counts = create_view(
        app,
        admin,
        json!({ "slug": "team-counts", "name": "Team counts", "source": "app.sales",
        "columns": [ { "name": "team", "column": "team" }, { "name": "n", "agg": "count" } ] }),
    )
    .await;
    publish(app, admin, &counts).await;
    let role = create_role(app, admin, "Viewers").await;
    grant(
        app,
        admin,
        &role,
        &resource,
        "read",
        Value::Null,
        Value::Null,
    )
    .await;
    for view in [&days, &teams] {
        let answer = app
            .post(
                "/admin/api/grants",
                admin,
                json!({ "data": { "roleId": role, "dataViewId": view, "action": "read" } }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    let created = app
        .post("/admin/api/dashboards", admin, json!({ "data": {
            "slug": "sales", "name": "Sales", "refreshSeconds": 30,
            "widgets": [
                { "id": "total", "type": "number", "title": "Sales", "dataViewId": days, "y": ["total"],
                  "layout": { "col": 0, "row": 0, "w": 3, "h": 2 } },
                { "id": "line", "type": "line", "title": "Per day", "dataViewId": days, "x": "day", "y": ["total", "count"],
                  "layout": { "col": 3, "row": 0, "w": 9, "h": 4 } },
                { "id": "bar", "type": "bar", "title": "Per day (bars)", "dataViewId": days, "x": "day", "y": ["count"],
                  "layout": { "col": 0, "row": 4, "w": 6, "h": 4 } },
                { "id": "pie", "type": "pie", "title": "By team", "dataViewId": teams, "x": "team", "y": ["total"],
                  "layout": { "col": 6, "row": 4, "w": 6, "h": 4 } },
                { "id": "table", "type": "table", "title": "Days", "dataViewId": days,
                  "layout": { "col": 0, "row": 8, "w": 6, "h": 4 } },
                { "id": "secret", "type": "table", "title": "Team counts", "dataViewId": counts, "y": ["team", "n"],
                  "layout": { "col": 6, "row": 8, "w": 6, "h": 4 } } ] } }))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    (role, created.data()["id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn dashboards_resolve_each_widget_under_the_callers_grants() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let (role, id) = sales_dashboard(&app, &admin).await;
    let (_, viewer) = member(&app, &admin, "viewer@example.com", &role).await;

    let answer = get_in(&app, "/api/dashboards/sales", &viewer, Some("UTC")).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.data()["zone"], json!("UTC"));
    assert_eq!(answer.data()["refreshSeconds"], json!(30));
    let widgets = answer.data()["widgets"].as_array().unwrap();
    assert_eq!(widgets.len(), 6);
    let days = expected_days(Tz::UTC);
    for widget in widgets {
        match widget["id"].as_str().unwrap() {
            "secret" => {
                assert_eq!(
                    widget["error"]["code"],
                    json!("PERMISSION_DENIED"),
                    "{widget}"
                );
                assert!(widget.get("rows").is_none());
            }
            "pie" => assert_eq!(
                widget["rows"],
                json!([ { "team": "blue", "total": 24.34 }, { "team": "red", "total": 28.49 } ])
            ),
            _ => assert_eq!(
                widget["rows"].as_array().unwrap().len(),
                days.len(),
                "{widget}"
            ),
        }
    }
    let admin_view = get_in(&app, "/api/dashboards/sales", &admin, None).await;
    let secret = &admin_view.data()["widgets"][5];
    assert_eq!(
        secret["rows"],
        json!([ { "team": "blue", "n": 3 }, { "team": "red", "n": 5 } ])
    );

    // Readers list the dashboards they may read something on.
    let listed = app.get("/api/dashboards", &viewer).await;
    assert_eq!(
        listed.data()[0]["slug"],
        json!("sales"),
        "{:?}",
        listed.body
    );
    let (_, stranger) = member(&app, &admin, "stranger@example.com", crate::USERS_ROLE).await;
    assert_eq!(
        app.get("/api/dashboards", &stranger).await.data(),
        &json!([])
    );
    assert_eq!(
        get_in(&app, "/api/dashboards/nothing", &viewer, None)
            .await
            .code(),
        "NOT_FOUND"
    );
    // A bad credential is refused before anything is looked up.
    for path in [
        "/api/dashboards/sales",
        "/api/dashboards/nothing",
        "/api/dashboards",
    ] {
        let refused = get_in(&app, path, "not-a-credential", None).await;
        assert_eq!(
            refused.status,
            StatusCode::UNAUTHORIZED,
            "{path}: {:?}",
            refused.body
        );
    }
    let refused = get_in(&app, "/api/views/nothing", "not-a-credential", None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    // Widgets are checked against their views; the rest of a PATCH stays.
    let bad = app
        .patch(
            &format!("/admin/api/dashboards/{id}"),
            &admin,
            json!({ "data": { "widgets": [ { "id": "w", "type": "line", "dataViewId": uuid::Uuid::now_v7(), "x": "day", "y": ["total"] } ] } }),
        )
        .await;
    assert_eq!(
        bad.body["errors"][0]["field"],
        json!("widgets[0].dataViewId")
    );
    let days_view = widgets[0]["dataViewId"].clone();
    let bad = app
        .patch(
            &format!("/admin/api/dashboards/{id}"),
            &admin,
            json!({ "data": { "widgets": [ { "id": "w", "type": "line", "dataViewId": days_view, "x": "week", "y": ["total"] } ] } }),
        )
        .await;
    assert_eq!(bad.body["errors"][0]["field"], json!("widgets[0].x"));
    let renamed = app
        .patch(
            &format!("/admin/api/dashboards/{id}"),
            &admin,
            json!({ "data": { "name": "Sales overview" } }),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{:?}", renamed.body);
    assert_eq!(renamed.data()["widgets"].as_array().unwrap().len(), 6);
    let stored = app
        .get(&format!("/admin/api/dashboards/{id}"), &admin)
        .await;
    assert_eq!(stored.data()["name"], json!("Sales overview"));
    assert_eq!(stored.data()["widgets"][1]["layout"]["w"], json!(9));
    let listed = app.get("/admin/api/dashboards", &admin).await;
    assert_eq!(listed.data()[0]["slug"], json!("sales"));
    assert_eq!(
        app.delete(&format!("/admin/api/dashboards/{id}"), &admin)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        get_in(&app, "/api/dashboards/sales", &viewer, None)
            .await
            .code(),
        "NOT_FOUND"
    );
}
