//! The console's own logic (API.md 18) in headless Chromium: a
//! function registered and exposed from the tables page, then granted to a
//! role from the matrix, and the role's member calls it; a script step's
//! code card and its logs in a test run.

use reqwest::StatusCode;
use serde_json::json;

use crate::browser::{click, console_at, finish, set_text, status_shows, wait_for_text};
use crate::console::answer_prompt;

#[tokio::test]
async fn a_function_is_registered_exposed_and_granted_from_the_console() {
    let (app, admin, browser) = console_at("/admin/tables").await;
    browser.client.set_window_size(1400, 1000).await.unwrap();
    for statement in [
        "CREATE SCHEMA shop",
        "CREATE FUNCTION shop.total(price numeric, quantity integer DEFAULT 1) RETURNS numeric \
         LANGUAGE sql IMMUTABLE AS 'SELECT price * quantity'",
        "CREATE FUNCTION shop.restock(item integer) RETURNS void LANGUAGE sql AS 'SELECT'",
    ] {
        app.db.sql(statement).await;
    }
    let role = app
        .post(
            "/admin/api/roles",
            &admin,
            json!({ "data": { "name": "Shoppers", "apiAccess": true } }),
        )
        .await;
    let role_id = role.data()["id"].as_str().unwrap().to_owned();
    app.create_user(&admin, "ann@example.com", "password-1", Some(vec![role_id]))
        .await;
    let ann = app.login("ann@example.com", "password-1").await;

    // A name that names nothing is refused in place; then both register.
    browser.fill("function-schema", "shop").await;
    browser.fill("function-name", "missing").await;
    click(&browser, "#register-function button").await;
    browser.wait_for("#function-error:not([hidden])").await;
    for name in ["total", "restock"] {
        browser.fill("function-name", name).await;
        click(&browser, "#register-function button").await;
        status_shows(&browser, &format!("Registered shop.{name}")).await;
    }
    let total = "li[data-function='shop.total']";
    wait_for_text(&browser, total, "price numeric").await;
    // GET is offered to the immutable function, not to the volatile one.
    let disabled = browser
        .wait_for("li[data-function='shop.restock'] input[data-method=GET]")
        .await
        .attr("disabled")
        .await
        .unwrap();
    assert!(disabled.is_some(), "GET of a volatile function is disabled");
    click(&browser, &format!("{total} input[data-method=GET]")).await;
    status_shows(&browser, "shop.total answers GET").await;
    assert_eq!(
        app.get("/api/rpc/shop/total?price=2&quantity=3", &ann)
            .await
            .status,
        StatusCode::FORBIDDEN,
        "exposed, not yet granted"
    );

    // Granted from the matrix: one invoke toggle, confirmed.
    click(&browser, "a[data-nav~=grants]").await;
    let cell = "[data-cell='Shoppers shop.total invoke']";
    click(&browser, cell).await;
    answer_prompt(&browser, "Let Shoppers call shop.total?", true).await;
    browser.wait_for(&format!("{cell}[data-granted]")).await;
    let answer = app
        .get("/api/rpc/shop/total?price=2&quantity=3", &ann)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body, json!({ "data": 6 }));

    // Pressed again, the grant goes.
    click(&browser, cell).await;
    answer_prompt(&browser, "Stop Shoppers calling shop.total?", true).await;
    status_shows(&browser, "may no longer call shop.total").await;
    assert_eq!(
        app.get("/api/rpc/shop/total?price=2", &ann).await.status,
        StatusCode::FORBIDDEN
    );
    finish(browser, "console-functions.png").await;
}

/// The workflow builder's script card: a module refused at save on its
/// code, its code shown with line numbers and typed into, and the test
/// run's answer showing the step's logs.
#[tokio::test]
async fn a_script_step_is_refused_in_place_edited_as_code_and_its_logs_shown() {
    let (_app, _admin, browser) = console_at("/admin/workflows").await;
    browser.client.set_window_size(1400, 1000).await.unwrap();
    wait_for_text(&browser, "#state", "New, not saved").await;
    click(&browser, "#tab-json").await;
    let definition = |code: &str| {
        serde_json::to_string_pretty(&json!({
            "slug": "scripted", "name": "Scripted",
            "trigger": { "type": "webhook", "method": "POST", "response": "sync", "access": "authenticated" },
            "steps": [
                { "id": "s", "type": "script", "code": code },
                { "id": "f", "type": "finish", "result": "{{steps.s.result}}" },
            ],
        }))
        .unwrap()
    };
    set_text(
        &browser,
        "definition",
        &definition("export default function ( {"),
    )
    .await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#editor-error", "steps[0].code").await;
    let good = "export default function (ctx) {\n  console.log('seen', ctx.start.data.body.n);\n  return ctx.start.data.body.n * 2;\n}\n";
    set_text(&browser, "definition", &definition(good)).await;
    click(&browser, "#save").await;
    wait_for_text(&browser, "#state", "Draft").await;
    click(&browser, "#tab-builder").await;
    let numbers = browser
        .wait_for("[data-type=script] .code-editor .line-numbers")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(numbers.split_whitespace().count(), 5, "{numbers:?}");
    let code = browser
        .wait_for("[data-type=script] .code-editor textarea")
        .await;
    assert_eq!(code.prop("value").await.unwrap().as_deref(), Some(good));
    set_text(&browser, "test-input", r#"{ "body": { "n": 21 } }"#).await;
    click(&browser, "#test button[type=submit]").await;
    browser
        .wait_for("#test-outcome[data-status=SUCCEEDED]")
        .await;
    wait_for_text(&browser, "#test-outcome", "seen 21").await;
    wait_for_text(&browser, "#test-outcome", "42").await;
    finish(browser, "console-script.png").await;
}
