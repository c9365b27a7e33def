//! The console pages under `/admin/`: the index of what exists, the
//! dashboards, drawn in the browser with Chart.js (vendored, embedded in the
//! binary), and a page for each area of the Admin API (docs/console.md). The
//! HTML holds no data: the scripts read the APIs with the session of the
//! person signed in through `/admin/auth/sign-in`. The project's
//! documentation is served in the same layout under `/admin/help/`.

use std::cell::OnceCell;
use std::rc::Rc;

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::routes::help;
use crate::routes::pages::secured;

const LAYOUT: &str = include_str!("../../assets/console/layout.html");
const SCRIPT: &str = include_str!("../../assets/console/console.js");
const STYLE: &str = include_str!("../../assets/console/console.css");
const ICON: &str = include_str!("../../assets/console/favicon.svg");
/// The definition editor the workflows and DataViews pages share.
const EDITOR: &str = include_str!("../../assets/console/editor.html");
const CHART: &str = include_str!("../../assets/vendor/chart-4.6.1.umd.min.js");
/// Where Chart.js is served; the version in the path lets browsers keep it.
const CHART_PATH: &str = "/admin/assets/chart-4.6.1.umd.min.js";

/// A page of the console.
struct Page {
    /// Where it is served.
    route: &'static str,
    title: &'static str,
    /// The `data-page` console.js starts the page by.
    name: &'static str,
    /// The page's shell, inside the layout.
    body: &'static str,
    /// The page's own script, served at `/admin/assets/{name}.js`.
    script: Option<&'static str>,
}

macro_rules! console_page {
    ($route:literal, $title:literal, $name:literal) => {
        Page {
            route: $route,
            title: $title,
            name: $name,
            body: include_str!(concat!("../../assets/console/", $name, ".html")),
            script: Some(include_str!(concat!("../../assets/console/", $name, ".js"))),
        }
    };
}

/// Every page but the index.
const PAGES: [Page; 12] = [
    Page {
        route: "/admin/dashboards/{slug}",
        title: "Dashboard",
        name: "dashboard",
        body: include_str!("../../assets/console/dashboard.html"),
        script: None,
    },
    console_page!("/admin/tables", "Tables", "tables"),
    console_page!("/admin/rows/{schema}/{table}", "Rows", "rows"),
    console_page!("/admin/people", "Users and roles", "people"),
    console_page!("/admin/grants", "Grants", "grants"),
    console_page!("/admin/access", "Tokens and invitations", "access"),
    console_page!("/admin/settings", "Settings", "settings"),
    console_page!("/admin/audit", "Audit log", "audit"),
    console_page!("/admin/workflows", "Workflows", "workflows"),
    console_page!("/admin/dataviews", "DataViews", "dataviews"),
    console_page!("/admin/sql", "SQL console", "sql"),
    console_page!("/admin/snapshot", "Snapshot", "snapshot"),
];

/// The HTML of `page` with its links written under `base`; the page's own
/// script (and Chart.js for dashboards) runs before console.js, which
/// starts the page.
fn render(base: &str, page: &Page) -> String {
    let own = match page.script {
        Some(_) => Some(format!("/admin/assets/{}.js", page.name)),
        None if page.name == "dashboard" => Some(CHART_PATH.to_owned()),
        None => None,
    };
    shell(
        base,
        page.title,
        page.name,
        &page.body.replace("{{editor}}", EDITOR),
        own.as_deref(),
    )
}

/// The layout around `body`, titled `title`, started as page `name`, with
/// the script at `own` (a path under `base`) loaded before console.js.
pub(crate) fn shell(base: &str, title: &str, name: &str, body: &str, own: Option<&str>) -> String {
    let mut scripts = String::new();
    if let Some(path) = own {
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

fn serve(
    content_type: &'static str,
    body: String,
) -> impl Fn() -> std::future::Ready<HttpResponse> + Clone {
    move || std::future::ready(secured(content_type, body.clone()))
}

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// Adds the console pages and their assets, their links written under
/// `base` (the mount path).
pub fn register<'a>(config: &'a mut web::ServiceConfig, base: &str) -> &'a mut web::ServiceConfig {
    let index = render(
        base,
        &Page {
            route: "/admin/",
            title: "Home",
            name: "index",
            body: include_str!("../../assets/console/index.html"),
            script: None,
        },
    );
    config
        .route("/admin", web::get().to(serve(HTML, index.clone())))
        .route("/admin/", web::get().to(serve(HTML, index)));
    for page in &PAGES {
        config.route(page.route, web::get().to(serve(HTML, render(base, page))));
        if let Some(script) = page.script {
            let path = format!("/admin/assets/{}.js", page.name);
            config.route(&path, web::get().to(serve(JAVASCRIPT, script.to_owned())));
        }
    }
    let help_base = base.to_owned();
    config.route(
        "/admin/help/",
        web::get().to(move || {
            let page = shell(
                &help_base,
                "Documentation",
                "help",
                &help::index(&help_base),
                None,
            );
            std::future::ready(secured(HTML, page))
        }),
    );
    let help_base = base.to_owned();
    // Each page is rendered at its first request, once per worker.
    let rendered: Rc<[OnceCell<String>]> = help::DOCS.iter().map(|_| OnceCell::new()).collect();
    config.route(
        "/admin/help/{slug}",
        web::get().to(move |slug: web::Path<String>| {
            let answer = match help::DOCS.iter().position(|doc| doc.slug == slug.as_str()) {
                Some(index) => {
                    let page = rendered[index].get_or_init(|| {
                        let doc = &help::DOCS[index];
                        let body = format!(
                            "<article class=\"doc\">{}</article>",
                            help::render(&help_base, doc.markdown)
                        );
                        let title = help::escape(help::title(doc.markdown));
                        shell(&help_base, &title, "help", &body, None)
                    });
                    secured(HTML, page.clone())
                }
                None => HttpResponse::NotFound().finish(),
            };
            std::future::ready(answer)
        }),
    );
    config
        .route(
            "/admin/assets/console.js",
            web::get().to(serve(JAVASCRIPT, SCRIPT.to_owned())),
        )
        .route(
            "/admin/assets/console.css",
            web::get().to(serve("text/css; charset=utf-8", STYLE.to_owned())),
        )
        .route(
            "/admin/assets/favicon.svg",
            web::get().to(serve("image/svg+xml", ICON.to_owned())),
        )
        .route(
            CHART_PATH,
            web::get().to(|| async {
                let mut answer = secured(JAVASCRIPT, CHART.to_owned());
                answer.headers_mut().insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static("public, max-age=31536000, immutable"),
                );
                answer
            }),
        )
}
