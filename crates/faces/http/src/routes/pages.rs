//! The account pages under `/admin/auth/`: small HTML forms over the JSON
//! routes, with their script and style embedded in the binary.

use std::sync::LazyLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Compress;
use actix_web::{HttpResponse, web};

use crate::routes::assets::{Asset, AssetSet, CSS, JAVASCRIPT};
use crate::routes::console;

const LAYOUT: &str = include_str!("../../assets/auth/layout.html");

/// The pages' scripts and style.
static ASSETS: [Asset; 3] = [
    Asset {
        name: "auth.js",
        content_type: JAVASCRIPT,
        body: include_str!("../../assets/auth/auth.js"),
    },
    Asset {
        name: "account.js",
        content_type: JAVASCRIPT,
        body: include_str!("../../assets/auth/account.js"),
    },
    Asset {
        name: "auth.css",
        content_type: CSS,
        body: include_str!("../../assets/auth/auth.css"),
    },
];

/// The pages' assets under `/admin/auth/assets/{version}/`.
static SET: LazyLock<AssetSet> = LazyLock::new(|| AssetSet::new("/admin/auth/assets", &ASSETS));

/// (path, title, body) of every page.
const PAGES: [(&str, &str, &str); 6] = [
    (
        "/admin/auth/sign-in",
        "Sign in",
        include_str!("../../assets/auth/sign-in.html"),
    ),
    (
        "/admin/auth/account",
        "Your account",
        include_str!("../../assets/auth/account.html"),
    ),
    (
        "/admin/auth/code",
        "Sign in with your email",
        include_str!("../../assets/auth/code.html"),
    ),
    (
        "/admin/auth/reset-password",
        "Choose a new password",
        include_str!("../../assets/auth/reset-password.html"),
    ),
    (
        "/admin/auth/verify-email",
        "Confirm your email address",
        include_str!("../../assets/auth/verify-email.html"),
    ),
    (
        "/admin/auth/accept-invitation",
        "Accept your invitation",
        include_str!("../../assets/auth/accept-invitation.html"),
    ),
];

/// Security headers of every page and asset. The token sits in the page's
/// URL, so no referrer ever leaves it.
pub(crate) fn secured(
    content_type: &'static str,
    body: impl actix_web::body::MessageBody + 'static,
) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(content_type)))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body)
}

/// Adds the pages and their assets, their links written under `base` (the
/// mount path: empty, or `/prefix`).
pub fn register<'a>(config: &'a mut web::ServiceConfig, base: &str) -> &'a mut web::ServiceConfig {
    for &(path, title, body) in &PAGES {
        let html = LAYOUT
            .replace("{{title}}", title)
            .replace("{{body}}", body)
            .replace("{{assets}}", &SET.path(base, ""))
            .replace("{{icon}}", &console::SET.path(base, "favicon.svg"))
            .replace("{{base}}", base);
        config.service(
            web::resource(path)
                .wrap(Compress::default())
                .route(web::get().to(move || {
                    let html = html.clone();
                    async move { secured("text/html; charset=utf-8", html) }
                })),
        );
    }
    SET.register(config, &ASSETS);
    config
}
