//! The console's second round: what is served (assets kept under their
//! version, pages not; no internal document named), and in headless
//! Chromium the DataView builder with its live preview as a role, the
//! guard on unsaved edits, the rows grid following realtime between two
//! browsers, steps reordered by dragging, and a second visit from cache.

use std::io::Read;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{TestApp, spawn_app};

use crate::browser::{
    Browser, add_rule_in, choose_in, click, console_at, type_into, wait_for_text, wait_gone,
};

/// The pages of the console a signed-in administrator opens (a dashboard's
/// is checked beside them).
pub(crate) const PAGES: [&str; 12] = [
    "/admin/",
    "/admin/tables",
    "/admin/rows/app/items",
    "/admin/people",
    "/admin/grants",
    "/admin/access",
    "/admin/settings",
    "/admin/audit",
    "/admin/workflows",
    "/admin/dataviews",
    "/admin/sql",
    "/admin/snapshot",
];

/// `app.items`: a key and a `label`, exposed for `methods`.
pub(crate) async fn items(app: &TestApp, admin: &str, methods: &[&str]) {
    crate::data::keyed_table(
        app,
        admin,
        "items",
        json!([{ "name": "label", "dataType": "text" }]),
        methods,
    )
    .await;
}

/// Every `src="…"` and `href="…"` of `html` under `/admin/` assets.
fn asset_paths(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for (at, _) in html.match_indices(attribute) {
            let start = at + attribute.len();
            let path = &html[start..start + html[start..].find('"').unwrap()];
            if path.contains("/assets/") && !found.iter().any(|p| p == path) {
                found.push(path.to_owned());
            }
        }
    }
    found
}

async fn fetch(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap()
}

fn cache_control(response: &reqwest::Response) -> String {
    response.headers()["cache-control"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn assets_are_kept_a_year_under_their_version_and_pages_never() {
    let app = spawn_app().await;
    let mut versions = std::collections::BTreeSet::new();
    for page in PAGES
        .iter()
        .chain(&["/admin/help/", "/admin/auth/sign-in", "/admin/auth/account"])
    {
        let response = fetch(&app, page).await;
        assert_eq!(response.status(), StatusCode::OK, "{page}");
        assert_eq!(cache_control(&response), "no-store", "{page}");
        let html = response.text().await.unwrap();
        let assets = asset_paths(&html);
        assert!(assets.len() >= 3, "{page}: {assets:?}");
        for path in assets {
            let response = fetch(&app, &path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(
                cache_control(&response),
                "public, max-age=31536000, immutable",
                "{path}"
            );
            assert_eq!(response.headers()["vary"], "accept-encoding", "{path}");
            let plain = response.bytes().await.unwrap();
            // A browser that takes gzip gets the same bytes compressed.
            let zipped = gzipped(&app, &path).await;
            assert!(zipped.len() < plain.len(), "{path}");
            let mut unzipped = Vec::new();
            flate2::read::GzDecoder::new(&zipped[..])
                .read_to_end(&mut unzipped)
                .unwrap();
            assert_eq!(unzipped, plain, "{path}");
            let parts: Vec<&str> = path.rsplitn(3, '/').collect();
            versions.insert(parts[1].to_owned());
            // Under another version (a page from before an upgrade): today's
            // file, which no cache keeps under that name.
            let old = format!("{}/0000000000000000/{}", parts[2], parts[0]);
            let response = fetch(&app, &old).await;
            assert_eq!(response.status(), StatusCode::OK, "{old}");
            assert_eq!(cache_control(&response), "no-store", "{old}");
        }
    }
    // One version for the console's assets, one for the account pages'.
    assert_eq!(versions.len(), 2, "{versions:?}");
    for version in &versions {
        assert_eq!(version.len(), 16, "{version}");
        let missing = fetch(&app, &format!("/admin/assets/{version}/nope.js")).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }
    let unversioned = fetch(&app, "/admin/assets/console.js").await;
    assert_eq!(unversioned.status(), StatusCode::NOT_FOUND);
    // The pages are compressed too.
    for page in ["/admin/", "/admin/auth/sign-in", "/admin/help/workflows"] {
        assert!(
            gzipped(&app, page).await.starts_with(&[0x1f, 0x8b]),
            "{page}"
        );
    }
}

/// The body of `path` asked for with gzip, which it must come in.
async fn gzipped(app: &TestApp, path: &str) -> Vec<u8> {
    let response = app
        .client
        .get(format!("{}{path}", app.address))
        .header("accept-encoding", "gzip, deflate")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    assert_eq!(response.headers()["content-encoding"], "gzip", "{path}");
    response.bytes().await.unwrap().to_vec()
}

/// The first internal name in `text`: the team's contract, its
/// architecture brief, the shared folder, an issue number.
fn internal_name(text: &str) -> Option<String> {
    let around = |at: usize, end: usize| {
        let start = (0..=at.saturating_sub(60))
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        let end = (end.min(text.len())..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..end].to_owned()
    };
    for name in ["API.md", "ARCHITECTURE.md", "service-interface", "shared/"] {
        for (at, _) in text.match_indices(name) {
            // `data-api.md` is a guide, not the contract.
            let before = text[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_') {
                return Some(around(at, at + name.len()));
            }
        }
    }
    let lower = text.to_lowercase();
    for (at, _) in lower.match_indices("issue") {
        let rest = lower[at + 5..].trim_start_matches('s').trim_start();
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Some(around(at, at + 12));
        }
    }
    None
}

#[tokio::test]
async fn nothing_the_browser_receives_names_an_internal_document() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    let index = fetch(&app, "/admin/help/").await.text().await.unwrap();
    let mut paths: Vec<String> = PAGES.iter().map(|p| (*p).to_owned()).collect();
    paths.extend([
        "/admin/help/".to_owned(),
        "/admin/auth/sign-in".to_owned(),
        "/admin/auth/account".to_owned(),
        "/admin/docs/".to_owned(),
    ]);
    for (at, _) in index.match_indices("href=\"/admin/help/") {
        let start = at + 6;
        paths.push(index[start..start + index[start..].find('"').unwrap()].to_owned());
    }
    assert!(paths.len() > 30, "{paths:?}");
    let mut served = 0;
    let mut bodies = Vec::new();
    for path in &paths {
        let html = fetch(&app, path).await.text().await.unwrap();
        for asset in asset_paths(&html) {
            bodies.push((
                asset.clone(),
                fetch(&app, &asset).await.text().await.unwrap(),
            ));
        }
        bodies.push((path.clone(), html));
    }
    let document = app.get("/admin/api/openapi", &admin).await;
    assert_eq!(document.status, StatusCode::OK);
    bodies.push(("/admin/api/openapi".to_owned(), document.body.to_string()));
    for (path, body) in &bodies {
        assert_eq!(internal_name(body), None, "{path}");
        served += 1;
    }
    assert!(served > 60, "{served}");
    // The check finds what it looks for.
    assert!(internal_name("see API.md section 2").is_some());
    assert!(internal_name("until issue 24 a name").is_some());
    assert!(internal_name("an issued token").is_none());
    assert!(internal_name("see data-api.md").is_none());
}

/// Answers the `confirm()` the page opened, which must say `expected`:
/// accepted or dismissed.
pub(crate) async fn answer_prompt(browser: &Browser, expected: &str, accept: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = browser.client.get_alert_text().await {
            assert!(text.contains(expected), "{text}");
            if accept {
                browser.client.accept_alert().await.unwrap();
            } else {
                browser.client.dismiss_alert().await.unwrap();
            }
            return;
        }
        assert!(Instant::now() < deadline, "no prompt saying {expected:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Picks the option `text` of the select at `css` when picking it opens a
/// prompt (the click's own answer is then the prompt's).
async fn choose_asking(browser: &Browser, css: &str, text: &str) {
    let select = browser.wait_for(css).await;
    let option = select
        .find(Locator::XPath(&format!(".//option[text()='{text}']")))
        .await
        .unwrap();
    let _ = option.click().await;
}

/// Clicks `css` when clicking it opens a prompt: from the page itself, a
/// moment later, so no WebDriver command is waiting on a navigation the
/// prompt holds back.
async fn click_asking(browser: &Browser, css: &str) {
    browser.wait_for(css).await;
    browser
        .client
        .execute(
            "setTimeout(() => document.querySelector(arguments[0]).click(), 0);",
            vec![json!(css)],
        )
        .await
        .unwrap();
}

async fn value_of(browser: &Browser, css: &str) -> String {
    browser
        .client
        .execute(
            "return document.querySelector(arguments[0]).value;",
            vec![json!(css)],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Orders at one instant (10:00 UTC on 1 April 2026, 23:00 that day in
/// Auckland); a role reading the orders under 10 only.
async fn orders_and_a_role(app: &TestApp, admin: &str) -> String {
    let orders = crate::data::keyed_table(
        app,
        admin,
        "orders",
        json!([{ "name": "region", "dataType": "text" },
            { "name": "amount", "dataType": "numeric" },
            { "name": "placed_at", "dataType": "timestamptz" }]),
        &["GET", "POST"],
    )
    .await;
    let at = "2026-04-01T10:00:00Z";
    let rows = json!({ "data": [
        { "region": "north", "amount": 5, "placed_at": at }, { "region": "north", "amount": 7, "placed_at": at },
        { "region": "south", "amount": 1, "placed_at": at }, { "region": "north", "amount": 50, "placed_at": at },
    ] });
    let inserted = app.post("/api/data/app/orders", admin, rows).await;
    assert_eq!(inserted.status, StatusCode::CREATED, "{:?}", inserted.body);
    let role = crate::data::create_role(app, admin, "Sellers").await;
    crate::data::grant(
        app,
        admin,
        &role,
        &orders,
        "read",
        json!({ "amount": { "lt": 10 } }),
        Value::Null,
    )
    .await;
    role
}

/// The DataViews page: a view built with clicks and typing only (source,
/// a group column, an aggregate renamed, a time bucket, a filter rule, a
/// sort key), previewed live as the administrator, as a role whose row
/// filter applies, and in another time zone; saved, its unsaved edits
/// guarded, and published.
#[tokio::test]
async fn a_dataview_is_built_and_previewed_as_a_role_by_clicks_and_typing() {
    let (app, admin, browser) = console_at("/admin/dataviews").await;
    orders_and_a_role(&app, &admin).await;
    browser.open(&app, "/admin/dataviews").await;
    wait_for_text(&browser, "#state", "New, not saved").await;
    type_into(&browser, "#builder input[data-path=slug]", "by-region").await;
    type_into(&browser, "#builder input[data-path=name]", "By region").await;
    choose_in(&browser, "#builder select[data-path=source]", "app.orders").await;
    click(&browser, "[data-add-column=plain]").await;
    choose_in(&browser, "[data-path='columns[0].column']", "region (text)").await;
    click(&browser, "[data-add-column=agg]").await;
    choose_in(&browser, "[data-path='columns[1].agg']", "sum of").await;
    choose_in(
        &browser,
        "[data-path='columns[1].column']",
        "amount (numeric)",
    )
    .await;
    assert_eq!(
        value_of(&browser, "[data-path='columns[1].name']").await,
        "sum_amount"
    );
    type_into(&browser, "[data-path='columns[1].name']", "total").await;
    click(&browser, "[data-add-column=bucket]").await;
    assert_eq!(
        value_of(&browser, "[data-path='columns[2].column']").await,
        "placed_at"
    );
    add_rule_in(
        &browser,
        "#builder [data-path=filter]",
        "amount",
        "is greater than",
        "2",
    )
    .await;
    click(&browser, "#add-sort").await;

    // Live, as the administrator: every order over 2, by region.
    wait_for_text(&browser, "#preview-rows tbody tr:first-child", "north").await;
    wait_for_text(&browser, "#preview-rows tbody tr:first-child", "62").await;
    wait_for_text(&browser, "#preview-rows", "2026-04-01T00:00:00+00:00").await;
    wait_for_text(&browser, "#preview-count", "1 row").await;
    // As the role: its row filter (under 10) applies before grouping.
    choose_in(&browser, "#preview-role", "Sellers").await;
    wait_for_text(&browser, "#preview-count", "as Sellers").await;
    wait_for_text(&browser, "#preview-rows tbody tr:first-child", "12").await;
    // In Auckland, 10:00 UTC is 23:00 on the same day, at +13:00.
    type_into(&browser, "#preview-zone", "Pacific/Auckland").await;
    wait_for_text(&browser, "#preview-rows", "2026-04-01T00:00:00+13:00").await;
    browser.accessible_in_both_themes("dataviews builder").await;

    // The JSON tab holds what the clicks built, and Save sends it.
    let expected = json!({ "slug": "by-region", "name": "By region", "source": "app.orders",
        "columns": [ { "name": "region", "column": "region" },
                     { "name": "total", "agg": "sum", "column": "amount" },
                     { "name": "day", "bucket": "day", "column": "placed_at" } ],
        "filter": { "amount": { "gt": 2 } }, "sort": ["region"], "limit": 1000 });
    let built: Value = serde_json::from_str(&value_of(&browser, "#definition").await).unwrap();
    assert_eq!(built, expected);
    click(&browser, "#save").await;
    wait_for_text(&browser, "#state", "Draft").await;
    let saved = app.get("/admin/api/dataviews", &admin).await;
    let view = &saved.data()[0];
    for key in ["source", "columns", "filter", "sort"] {
        assert_eq!(view[key], expected[key], "{key}");
    }

    // An edit not saved: opening another view asks, and staying keeps it.
    type_into(&browser, "#builder input[data-path=name]", "Regions").await;
    choose_asking(&browser, "#records", "— new —").await;
    answer_prompt(&browser, "unsaved edits", false).await;
    assert_eq!(
        value_of(&browser, "#builder input[data-path=name]").await,
        "Regions"
    );
    // Publish serves the saved version, asks, and keeps the edit here.
    click_asking(&browser, "#publish").await;
    answer_prompt(&browser, "last saved version", true).await;
    wait_for_text(&browser, "#state", "Published").await;
    wait_for_text(&browser, "#state", "not saved yet").await;
    assert_eq!(
        value_of(&browser, "#builder input[data-path=name]").await,
        "Regions"
    );
    let served = app.get("/api/views/by-region", &admin).await;
    assert_eq!(served.status, StatusCode::OK, "{:?}", served.body);
    assert_eq!(served.data()[0]["total"], json!(62));
    crate::browser::finish(browser, "dataview-builder.png").await;
}

/// Unsaved edits in the workflow builder survive Enabled and ask before
/// another workflow opens or a link leaves the page; the settings page
/// asks before a link leaves it with a change not saved.
#[tokio::test]
async fn unsaved_edits_ask_before_they_are_lost() {
    let (app, admin, browser) = console_at("/admin/settings").await;
    // Wide enough for the sidebar's links.
    browser.client.set_window_size(1400, 1000).await.unwrap();
    let made = app
        .post(
            "/admin/api/workflows",
            &admin,
            json!({ "data": { "slug": "hello", "name": "Hello", "trigger": { "type": "manual" },
                "steps": [{ "id": "done", "type": "finish", "result": 1 }] } }),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    let id = made.data()["id"].as_str().unwrap().to_owned();

    // Settings: a changed value asks before a link leaves; saved, it does not.
    let input = "#settings-rows [data-key='data.statement_timeout_ms']";
    type_into(&browser, input, "20000").await;
    click_asking(&browser, "a[data-nav~=tables]").await;
    answer_prompt(&browser, "unsaved edits", false).await;
    assert!(
        browser
            .client
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/admin/settings")
    );
    click(&browser, "#settings button[type=submit]").await;
    wait_for_text(&browser, "#status", "Saved").await;
    click(&browser, "a[data-nav~=workflows]").await;
    wait_for_text(&browser, "#records", "Hello").await;

    browser
        .open(&app, &format!("/admin/workflows?id={id}"))
        .await;
    wait_for_text(&browser, "#state", "Draft").await;
    type_into(&browser, "#builder input[data-path=name]", "Renamed").await;
    choose_asking(&browser, "#records", "— new —").await;
    answer_prompt(&browser, "unsaved edits", false).await;
    assert_eq!(value_of(&browser, "#records").await, id);
    assert_eq!(
        value_of(&browser, "#builder input[data-path=name]").await,
        "Renamed"
    );
    // Enabled (switched) reloads the workflow; the edit stays.
    let was_enabled = made.data()["enabled"].as_bool().unwrap();
    click(&browser, "#enabled").await;
    let switched = if was_enabled { "Disabled" } else { "Enabled" };
    wait_for_text(&browser, "#status", switched).await;
    wait_for_text(&browser, "#state", "not saved yet").await;
    assert_eq!(
        value_of(&browser, "#builder input[data-path=name]").await,
        "Renamed"
    );
    // Leaving by a link asks; accepted, it leaves.
    click_asking(&browser, "a[data-nav~=audit]").await;
    answer_prompt(&browser, "unsaved edits", true).await;
    browser.wait_for("main[data-page=audit]").await;
    let stored = app.get(&format!("/admin/api/workflows/{id}"), &admin).await;
    assert_eq!(stored.data()["name"], "Hello");
    assert_eq!(stored.data()["enabled"], json!(!was_enabled));
    browser.client.close().await.unwrap();
}

/// Steps move by dragging one onto another's place, and by the keys'
/// buttons as before.
#[tokio::test]
async fn steps_move_by_dragging_and_by_buttons() {
    let (_app, _, browser) = console_at("/admin/workflows").await;
    wait_for_text(&browser, "#state", "New, not saved").await;
    browser.wait_for("#builder .drag-handle").await;
    let order = browser
        .client
        .execute(
            "const handles = document.querySelectorAll('#builder .drag-handle');
             const cards = document.querySelectorAll('#builder .step-card');
             const data = new DataTransfer();
             const fire = (node, type) => node.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: data }));
             fire(handles[1], 'dragstart');
             fire(cards[0], 'dragover');
             fire(cards[0], 'drop');
             fire(handles[1], 'dragend');
             return JSON.parse(document.getElementById('definition').value).steps.map((s) => s.id);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(order, json!(["done", "greet"]));
    click(&browser, "[aria-label='Move down: done']").await;
    let order: Value = serde_json::from_str(&value_of(&browser, "#definition").await).unwrap();
    assert_eq!(order["steps"][0]["id"], "greet");
    browser.client.close().await.unwrap();
}

/// Two people on the same rows page: a row one inserts shows in the
/// other's grid within 2 s, marked; a change and a delete made elsewhere
/// apply in place; a stream ended by signing out shows as paused.
#[tokio::test]
async fn a_row_inserted_in_one_browser_shows_in_the_others_grid_within_2_s() {
    let app = spawn_app().await;
    let admin = app.admin_session().await;
    items(&app, &admin, &["GET", "POST", "PATCH", "DELETE"]).await;
    let first = app
        .post(
            "/api/data/app/items",
            &admin,
            json!({ "data": { "label": "first" } }),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let (one, other) = (Browser::start().await, Browser::start().await);
    for browser in [&one, &other] {
        browser.sign_in_to(&app, "/admin/rows/app/items").await;
        browser.wait_for("#live[data-state=live]").await;
    }
    type_into(
        &one,
        "#grid .new-row input[data-column=label]",
        "from the other browser",
    )
    .await;
    click(&one, "#insert").await;
    let clicked = Instant::now();
    let deadline = clicked + Duration::from_secs(2);
    loop {
        let grid = other.wait_for("#grid tbody").await.text().await.unwrap();
        if grid.contains("from the other browser") {
            break;
        }
        assert!(Instant::now() < deadline, "not shown within 2 s: {grid}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("shown in the other grid after {:?}", clicked.elapsed());
    other.wait_for("#grid tbody tr.changed").await;
    wait_for_text(&other, "#count", "of 2").await;

    // A change elsewhere: in place, the row count unchanged.
    let id = first.data()["id"].as_i64().unwrap();
    let changed = app
        .patch(
            &format!("/api/data/app/items/{id}"),
            &admin,
            json!({ "data": { "label": "changed elsewhere" } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK);
    wait_for_text(
        &other,
        &format!("#grid tr[data-key='{id}']"),
        "changed elsewhere",
    )
    .await;
    let rows = other
        .client
        .find_all(Locator::Css("#grid tbody tr[data-key]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let removed = app
        .delete(&format!("/api/data/app/items/{id}"), &admin)
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    wait_gone(&other, &format!("#grid tr[data-key='{id}']")).await;
    wait_for_text(&other, "#count", "of 1").await;
    add_rule_in(&other, "#filter-builder", "label", "equals", "x").await;
    other.accessible_in_both_themes("rows page, live").await;

    // A filter the rules cannot show exactly (an empty "or": no row) is
    // kept as JSON, never widened by the rules.
    let none = crate::data::encode(r#"{"or":[]}"#);
    other
        .open(&app, &format!("/admin/rows/app/items?filter={none}"))
        .await;
    wait_for_text(&other, "#filter-builder .filter-rules", "edited as JSON").await;
    wait_for_text(&other, "#count", "No rows").await;
    other.wait_for("#live[data-state=live]").await;

    // The other browser's session signed out elsewhere: its stream ends
    // and the grid says it is paused.
    let token = other
        .client
        .execute("return sessionStorage.getItem('tessera.session');", vec![])
        .await
        .unwrap();
    let out = app
        .client
        .post(format!("{}/api/auth/logout", app.address))
        .bearer_auth(token.as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert!(out.status().is_success());
    other.wait_for("#live[data-state=refused]").await;
    wait_for_text(&other, "#live-text", "Paused").await;
    one.client.close().await.unwrap();
    other.client.close().await.unwrap();
}

/// A second visit of `/admin/` takes its assets from the cache: what it
/// transfers (the page, and the reads of what exists) is under 5 KB.
#[tokio::test]
async fn a_second_visit_of_the_console_transfers_under_5_kb() {
    let (app, _, browser) = console_at("/admin/").await;
    browser.open(&app, "/admin/").await;
    browser.wait_for("#sections section").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // [path, bytes transferred, bytes of the body] of the page and of
    // everything it loaded.
    let entries = browser
        .client
        .execute(
            "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                .map((e) => [new URL(e.name).pathname, e.transferSize, e.decodedBodySize]);",
            vec![],
        )
        .await
        .unwrap();
    let entries = entries.as_array().unwrap();
    let sum = |index: usize, assets: bool| -> u64 {
        entries
            .iter()
            .filter(|e| e[0].as_str().unwrap().contains("/assets/") == assets)
            .map(|e| e[index].as_u64().unwrap())
            .sum()
    };
    // The assets came from the cache, whole.
    assert!(sum(2, true) > 20_000, "{entries:?}");
    assert_eq!(sum(1, true), 0, "assets came from the network: {entries:?}");
    let transferred = sum(1, false);
    println!("second visit: {transferred} bytes: {entries:?}");
    assert!(
        transferred > 0 && transferred < 5 * 1024,
        "{transferred}: {entries:?}"
    );
    browser.client.close().await.unwrap();
}
