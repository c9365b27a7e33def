//! The Admin API's Swagger UI under `/admin/docs/`, from the files embedded
//! in the binary. The page signs in through `/admin/auth/sign-in` and sends
//! the session with the document's request and every "Try it out".

use std::borrow::Cow;

use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpResponse, web};
use utoipa_swagger_ui::Config;

use crate::error::ApiError;

const INITIALIZER: &str = include_str!("../../assets/docs/initializer.js");

/// Security headers of the page and its files; Swagger UI draws with inline
/// styles and data: images.
fn secured(content_type: &str, body: Bytes) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
            ),
        ))
        .body(body)
}

/// Our initializer of Swagger UI, with the mount path written in.
struct Initializer(Bytes);

async fn file(
    tail: web::Path<String>,
    config: web::Data<Config<'static>>,
    initializer: web::Data<Initializer>,
) -> Result<HttpResponse, ApiError> {
    let tail = tail.into_inner();
    if tail == "swagger-initializer.js" {
        return Ok(secured(
            "text/javascript; charset=utf-8",
            initializer.0.clone(),
        ));
    }
    match utoipa_swagger_ui::serve(&tail, config.into_inner()) {
        Ok(Some(file)) => {
            let body = match file.bytes {
                Cow::Borrowed(bytes) => Bytes::from_static(bytes),
                Cow::Owned(bytes) => Bytes::from(bytes),
            };
            let mut answer = secured(&file.content_type, body);
            if file.gzpipped {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            Ok(answer)
        }
        _ => Err(ApiError::not_found()),
    }
}

/// Adds `/admin/docs/` (and a redirect from `/admin/docs`), its links
/// written under `base` (the mount path).
pub fn register<'a>(config: &'a mut web::ServiceConfig, base: &str) -> &'a mut web::ServiceConfig {
    let folder = format!("{base}/admin/docs/");
    let initializer = Bytes::from(INITIALIZER.replace("{{base}}", base));
    config
        .route(
            "/admin/docs",
            web::get().to(move || {
                let folder = folder.clone();
                async move {
                    HttpResponse::PermanentRedirect()
                        .insert_header((header::LOCATION, folder))
                        .finish()
                }
            }),
        )
        .service(
            web::resource("/admin/docs/{tail:.*}")
                .app_data(web::Data::new(Initializer(initializer)))
                // The configuration only feeds Swagger UI's own initializer, which ours replaces.
                .app_data(web::Data::new(Config::new(["/admin/api/openapi"])))
                .route(web::get().to(file)),
        )
}
