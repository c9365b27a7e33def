//! The console's database functions (API.md 18) in headless Chromium: a
//! function registered and exposed from the tables page, then granted to a
//! role from the matrix, and the role's member calls it.

use reqwest::StatusCode;
use serde_json::json;

use crate::browser::{click, console_at, finish, status_shows, wait_for_text};
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
