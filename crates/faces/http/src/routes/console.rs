//! The console pages under `/admin/`: the index of what exists, the
//! dashboards, drawn in the browser with Chart.js (vendored, embedded in the
//! binary), and a page for each area of the Admin API (docs/console.md). The
//! HTML holds no data: the scripts read the APIs with the session of the
//! person signed in through `/admin/auth/sign-in`. The project's
//! documentation is served in the same layout under `/admin/help/`.

use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::LazyLock;

use actix_web::middleware::Compress;
use actix_web::{HttpResponse, web};

use crate::routes::assets::{Asset, AssetSet, CSS, JAVASCRIPT, SVG};
use crate::routes::help;
use crate::routes::pages::secured;

const LAYOUT: &str = include_str!("../../assets/console/layout.html");

macro_rules! script {
    ($name:literal) => {
        Asset {
            name: concat!($name, ".js"),
            content_type: JAVASCRIPT,
            body: include_str!(concat!("../../assets/console/", $name, ".js")),
        }
    };
}

/// Every script, style and icon of the console.
static ASSETS: [Asset; 17] = [
    script!("console"),
    Asset {
        name: "console.css",
        content_type: CSS,
        body: include_str!("../../assets/console/console.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: SVG,
        body: include_str!("../../assets/console/favicon.svg"),
    },
    Asset {
        name: "chart.umd.min.js",
        content_type: JAVASCRIPT,
        body: include_str!("../../assets/vendor/chart-4.6.1.umd.min.js"),
    },
    script!("filters"),
    script!("tables"),
    script!("rows"),
    script!("people"),
    script!("grants"),
    script!("access"),
    script!("settings"),
    script!("audit"),
    script!("workflows"),
    script!("dataviews"),
    script!("sql"),
    script!("snapshot"),
    script!("tabs"),
];

/// The console's assets under `/admin/assets/{version}/`.
pub(crate) static SET: LazyLock<AssetSet> =
    LazyLock::new(|| AssetSet::new("/admin/assets", &ASSETS));

/// A page of the console.
struct Page {
    /// Where it is served.
    route: &'static str,
    title: &'static str,
    /// The `data-page` console.js starts the page by.
    name: &'static str,
    /// The page's shell, inside the layout.
    body: &'static str,
    /// The assets its page runs on, loaded before console.js.
    scripts: &'static [&'static str],
}

macro_rules! console_page {
    ($route:literal, $title:literal, $name:literal $(, $shared:literal)*) => {
        Page {
            route: $route,
            title: $title,
            name: $name,
            body: include_str!(concat!("../../assets/console/", $name, ".html")),
            scripts: &[$($shared,)* concat!($name, ".js")],
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
        scripts: &["chart.umd.min.js"],
    },
    console_page!("/admin/tables", "Tables", "tables"),
    console_page!("/admin/rows/{schema}/{table}", "Rows", "rows", "filters.js"),
    console_page!("/admin/people", "Users and roles", "people"),
    console_page!("/admin/grants", "Grants", "grants", "filters.js"),
    console_page!("/admin/access", "Tokens and invitations", "access"),
    console_page!("/admin/settings", "Settings", "settings"),
    console_page!("/admin/audit", "Audit log", "audit"),
    console_page!("/admin/workflows", "Workflows", "workflows", "tabs.js"),
    console_page!(
        "/admin/dataviews",
        "DataViews",
        "dataviews",
        "tabs.js",
        "filters.js"
    ),
    console_page!("/admin/sql", "SQL console", "sql"),
    console_page!("/admin/snapshot", "Snapshot", "snapshot"),
];

/// The editor of definitions (records, Builder and JSON tabs) the
/// workflows and DataViews pages share, at their `{{editor}}`.
const EDITOR: &str = include_str!("../../assets/console/editor.html");

/// The HTML of `page` with its links written under `base`.
fn render(base: &str, page: &Page) -> String {
    let body = page.body.replace("{{editor}}", EDITOR);
    shell(base, page.title, page.name, &body, page.scripts)
}

/// The layout around `body`, titled `title`, started as page `name`, with
/// the assets named in `scripts` loaded before console.js, which starts
/// the page.
pub(crate) fn shell(base: &str, title: &str, name: &str, body: &str, scripts: &[&str]) -> String {
    let mut tags = String::new();
    for script in scripts.iter().chain(&["console.js"]) {
        tags.push_str(&format!(
            "<script src=\"{}\" defer></script>\n",
            SET.path(base, script)
        ));
    }
    LAYOUT
        .replace("{{title}}", title)
        .replace("{{scripts}}", tags.trim_end())
        .replace("{{page}}", name)
        .replace("{{body}}", body)
        .replace("{{assets}}", &SET.path(base, ""))
        .replace("{{base}}", base)
}

const HTML: &str = "text/html; charset=utf-8";

/// Serves `body` at `path`, compressed when the browser takes gzip.
fn page(config: &mut web::ServiceConfig, path: &str, body: String) {
    config.service(
        web::resource(path)
            .wrap(Compress::default())
            .route(web::get().to(move || std::future::ready(secured(HTML, body.clone())))),
    );
}

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
            scripts: &[],
        },
    );
    page(config, "/admin", index.clone());
    page(config, "/admin/", index);
    for shown in &PAGES {
        page(config, shown.route, render(base, shown));
    }
    SET.register(config, &ASSETS);
    let help_base = base.to_owned();
    page(
        config,
        "/admin/help/",
        shell(
            &help_base,
            "Documentation",
            "help",
            &help::index(&help_base),
            &[],
        ),
    );
    let help_base = base.to_owned();
    // Each page is rendered at its first request, once per worker.
    let rendered: Rc<[OnceCell<String>]> = help::DOCS.iter().map(|_| OnceCell::new()).collect();
    config.service(
        web::resource("/admin/help/{slug}")
            .wrap(Compress::default())
            .route(web::get().to(move |slug: web::Path<String>| {
                let answer = match help::DOCS.iter().position(|doc| doc.slug == slug.as_str()) {
                    Some(index) => {
                        let page = rendered[index].get_or_init(|| {
                            let doc = &help::DOCS[index];
                            let body = format!(
                                "<article class=\"doc\">{}</article>",
                                help::render(&help_base, doc.markdown)
                            );
                            let title = help::escape(help::title(doc.markdown));
                            shell(&help_base, &title, "help", &body, &[])
                        });
                        secured(HTML, page.clone())
                    }
                    None => HttpResponse::NotFound().finish(),
                };
                std::future::ready(answer)
            })),
    );
    config
}
