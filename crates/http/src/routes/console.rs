//! The console pages under `/admin/`: the index of what exists, the
//! dashboards, drawn in the browser with Chart.js (vendored, embedded in the
//! binary), the tables and their rows, users and roles. The HTML holds no data: the script reads the APIs with the
//! session of the person signed in through `/admin/auth/sign-in`.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::routes::pages::secured;

const LAYOUT: &str = include_str!("../../assets/console/layout.html");
const SCRIPT: &str = include_str!("../../assets/console/console.js");
const STYLE: &str = include_str!("../../assets/console/console.css");
const TABLES: &str = include_str!("../../assets/console/tables.js");
/// Where the tables page's script is served.
const TABLES_PATH: &str = "/admin/assets/tables.js";
const ROWS: &str = include_str!("../../assets/console/rows.js");
/// Where the rows page's script is served.
const ROWS_PATH: &str = "/admin/assets/rows.js";
const PEOPLE: &str = include_str!("../../assets/console/people.js");
/// Where the users and roles page's script is served.
const PEOPLE_PATH: &str = "/admin/assets/people.js";
const CHART: &str = include_str!("../../assets/vendor/chart-4.6.1.umd.min.js");
/// Where Chart.js is served; the version in the path lets browsers keep it.
const CHART_PATH: &str = "/admin/assets/chart-4.6.1.umd.min.js";

/// A page of the console; `script`, the path of the page's own script (run
/// before console.js, which starts the page), or `None`.
fn page(base: &str, title: &str, name: &str, body: &str, script: Option<&str>) -> String {
    let mut scripts = String::new();
    if let Some(path) = script {
        scripts.push_str(&format!("<script src=\"{base}{path}\" defer></script>\n"));
    }
    scripts.push_str(&format!(
        "<script src=\"{base}/admin/assets/console.js\" defer></script>"
    ));
    LAYOUT
        .replace("{{title}}", title)
        .replace("{{scripts}}", &scripts)
        .replace("{{page}}", name)
        .replace("{{body}}", body)
        .replace("{{base}}", base)
}

fn html(body: String) -> impl Fn() -> std::future::Ready<HttpResponse> + Clone {
    move || std::future::ready(secured("text/html; charset=utf-8", body.clone()))
}

/// Adds the console pages and their assets, their links written under
/// `base` (the mount path).
pub fn register<'a>(config: &'a mut web::ServiceConfig, base: &str) -> &'a mut web::ServiceConfig {
    let index = page(
        base,
        "Home",
        "index",
        include_str!("../../assets/console/index.html"),
        None,
    );
    let dashboard = page(
        base,
        "Dashboard",
        "dashboard",
        include_str!("../../assets/console/dashboard.html"),
        Some(CHART_PATH),
    );
    let tables = page(
        base,
        "Tables",
        "tables",
        include_str!("../../assets/console/tables.html"),
        Some(TABLES_PATH),
    );
    let rows = page(
        base,
        "Rows",
        "rows",
        include_str!("../../assets/console/rows.html"),
        Some(ROWS_PATH),
    );
    let people = page(
        base,
        "Users and roles",
        "people",
        include_str!("../../assets/console/people.html"),
        Some(PEOPLE_PATH),
    );
    config
        .route("/admin", web::get().to(html(index.clone())))
        .route("/admin/", web::get().to(html(index)))
        .route("/admin/dashboards/{slug}", web::get().to(html(dashboard)))
        .route("/admin/tables", web::get().to(html(tables)))
        .route("/admin/rows/{schema}/{table}", web::get().to(html(rows)))
        .route("/admin/people", web::get().to(html(people)))
        .route(
            PEOPLE_PATH,
            web::get()
                .to(|| async { secured("text/javascript; charset=utf-8", PEOPLE.to_owned()) }),
        )
        .route(
            ROWS_PATH,
            web::get().to(|| async { secured("text/javascript; charset=utf-8", ROWS.to_owned()) }),
        )
        .route(
            TABLES_PATH,
            web::get()
                .to(|| async { secured("text/javascript; charset=utf-8", TABLES.to_owned()) }),
        )
        .route(
            "/admin/assets/console.js",
            web::get()
                .to(|| async { secured("text/javascript; charset=utf-8", SCRIPT.to_owned()) }),
        )
        .route(
            "/admin/assets/console.css",
            web::get().to(|| async { secured("text/css; charset=utf-8", STYLE.to_owned()) }),
        )
        .route(
            CHART_PATH,
            web::get().to(|| async {
                let mut answer = secured("text/javascript; charset=utf-8", CHART.to_owned());
                answer.headers_mut().insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static("public, max-age=31536000, immutable"),
                );
                answer
            }),
        )
}
