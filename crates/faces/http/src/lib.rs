//! The HTTP face of Tessera: actix-web routes, extractors, the error envelope
//! and the OpenAPI document generated from the handlers.

mod convert;
pub mod error;
pub mod extract;
mod middleware;
mod respond;
pub mod routes;
mod state;

pub use middleware::record_metrics;
pub use routes::admin::openapi::AdminDocument;
pub use state::{AppState, ReadinessCheck};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, web};
use kernel::Code;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_actix_web::scope as documented;
use utoipa_actix_web::service_config::ServiceConfig;
use utoipa_actix_web::{AppExt, UtoipaApp};

use crate::error::ApiError;
use crate::routes::{
    account, admin, auth as auth_routes, console, data as data_routes, docs, files as file_routes,
    health, mcp as mcp_routes, mfa, oauth, pages, passkeys, realtime as realtime_routes,
    rpc as rpc_routes, views as view_routes, workflows as workflow_routes,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "Tessera Admin API", description = "Administration, authentication and health routes of Tessera."),
    modifiers(&BearerAuth),
    components(schemas(api_types::ErrorEnvelope, api_types::ErrorObject)),
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A session token or a personal access token (svc_...)"))
                    .build(),
            ),
        );
    }
}

/// Every route and page, the pages' links written under `base` (the mount
/// path: empty, or `/prefix`).
fn configure(config: &mut ServiceConfig, base: &str) {
    config
        .map(|c| pages::register(c, base))
        .map(|c| docs::register(c, base))
        .map(|c| console::register(c, base))
        .service(health::healthz)
        .service(health::readyz)
        .service(
            documented::scope("/api/auth")
                .service(auth_routes::login)
                .service(auth_routes::logout)
                .service(auth_routes::me)
                .service(auth_routes::update_me)
                .service(auth_routes::sessions)
                .service(auth_routes::end_session)
                .service(auth_routes::tokens)
                .service(auth_routes::create_token)
                .service(auth_routes::revoke_token)
                .service(mfa::start_totp)
                .service(mfa::confirm_totp)
                .service(mfa::disable_totp)
                .service(mfa::start_passkey)
                .service(mfa::verify)
                .service(mfa::request_email_code)
                .service(mfa::verify_email_code)
                .service(mfa::methods)
                .service(passkeys::start_registration)
                .service(passkeys::finish_registration)
                .service(passkeys::list)
                .service(passkeys::remove)
                .service(passkeys::start_login)
                .service(passkeys::finish_login)
                .service(oauth::providers)
                .service(oauth::start)
                .service(oauth::callback)
                .service(account::register)
                .service(account::forgot_password)
                .service(account::reset_password)
                .service(account::change_password)
                .service(account::verify_email)
                .service(account::resend_verification)
                .service(account::accept_invitation),
        )
        .service(
            documented::scope("/admin/api")
                .service(admin::users::list)
                .service(admin::users::create)
                .service(admin::users::get)
                .service(admin::users::update)
                .service(admin::users::remove)
                .service(admin::users::identities)
                .service(admin::users::unlink_identity)
                .service(admin::users::reset_mfa)
                .service(admin::roles::list)
                .service(admin::roles::create)
                .service(admin::roles::get)
                .service(admin::roles::update)
                .service(admin::roles::remove)
                .service(admin::roles::members)
                .service(admin::roles::add_member)
                .service(admin::roles::remove_member)
                .service(admin::roles::preview)
                .service(admin::tokens::list)
                .service(admin::tokens::create)
                .service(admin::tokens::revoke)
                .service(admin::settings::get)
                .service(admin::settings::update)
                .service(admin::audit::list)
                .service(admin::invitations::list)
                .service(admin::invitations::create)
                .service(admin::invitations::remove)
                .service(admin::schema::preview_table)
                .service(admin::schema::create_table)
                .service(admin::schema::tables)
                .service(admin::schema::add_column)
                .service(admin::schema::drop_table)
                .service(admin::schema_changes::rename_table)
                .service(admin::schema_changes::preview_column)
                .service(admin::schema_changes::alter_column)
                .service(admin::schema_changes::drop_column)
                .service(admin::schema_changes::indexes)
                .service(admin::schema_changes::preview_index)
                .service(admin::schema_changes::create_index)
                .service(admin::schema_changes::drop_index)
                .service(admin::snapshot::export)
                .service(admin::snapshot::diff)
                .service(admin::snapshot::apply)
                .service(admin::schema::resources)
                .service(admin::schema::register)
                .service(admin::schema::get_resource)
                .service(admin::schema::expose)
                .service(admin::grants::list)
                .service(admin::grants::create)
                .service(admin::grants::remove)
                .service(admin::workflows::schedule_preview)
                .service(admin::workflows::list)
                .service(admin::workflows::create)
                .service(admin::workflows::get)
                .service(admin::workflows::update)
                .service(admin::workflows::remove)
                .service(admin::workflows::publish)
                .service(admin::workflows::test)
                .service(admin::workflows::runs)
                .service(admin::workflows::run_now)
                .service(admin::workflows::replay)
                .service(admin::dataviews::list)
                .service(admin::dataviews::create)
                .service(admin::dataviews::get)
                .service(admin::dataviews::update)
                .service(admin::dataviews::remove)
                .service(admin::dataviews::publish)
                .service(admin::dataviews::preview)
                .service(admin::dataviews::preview_definition)
                .service(admin::dashboards::list)
                .service(admin::dashboards::create)
                .service(admin::dashboards::get)
                .service(admin::dashboards::update)
                .service(admin::dashboards::remove)
                .service(admin::sql::run)
                .service(admin::openapi::document)
                .service(admin::openapi_data::document),
        )
        .service(
            documented::scope("/api/workflows")
                .service(workflow_routes::result)
                .service(workflow_routes::webhook_post)
                .service(workflow_routes::webhook_get)
                .route(
                    "/{slug}/webhook",
                    web::route().to(workflow_routes::other_method),
                ),
        )
        .service(documented::scope("/api/views").service(view_routes::read))
        .service(documented::scope("/api/realtime").service(realtime_routes::subscribe))
        .service(
            documented::scope("/api/mcp")
                .service(mcp_routes::endpoint)
                .default_service(web::to(mcp_routes::other_method)),
        )
        .service(
            documented::scope("/api/files")
                .service(file_routes::upload_file)
                .service(file_routes::download_file)
                .service(file_routes::file_meta)
                .service(file_routes::delete_file),
        )
        .service(
            documented::scope("/api/dashboards")
                .service(view_routes::dashboards)
                .service(view_routes::dashboard),
        )
        .service(documented::scope("/api/batch").service(data_routes::batch))
        .service(
            documented::scope("/api/rpc")
                .service(rpc_routes::call_post)
                .service(rpc_routes::call_get),
        )
        .service(
            documented::scope("/api/data")
                .service(data_routes::list)
                .service(data_routes::get)
                .service(data_routes::create)
                .service(data_routes::update)
                .service(data_routes::remove)
                .route(
                    "/{schema}/{table}",
                    web::route().to(data_routes::other_method),
                )
                .route(
                    "/{schema}/{table}/{pk}",
                    web::route().to(data_routes::other_method),
                ),
        );
}

/// Every route in an application of its own, with their OpenAPI document.
fn routes() -> UtoipaApp<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(|config| configure(config, ""))
}

/// The OpenAPI 3.1 document of every route, generated from the handlers.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let mut document = routes().split_for_parts().1;
    describe_responses(&mut document);
    document_common_errors(&mut document);
    document
}

/// Every operation of `document`.
fn operations(
    document: &mut utoipa::openapi::OpenApi,
) -> impl Iterator<Item = (&String, &mut utoipa::openapi::path::Operation)> {
    document.paths.paths.iter_mut().flat_map(|(path, item)| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ]
        .into_iter()
        .flatten()
        .map(move |operation| (path, operation))
    })
}

/// OpenAPI requires a description on every response: a response declared
/// without one gets its status's reason phrase ("No Content", "Not Found").
fn describe_responses(document: &mut utoipa::openapi::OpenApi) {
    for (_, operation) in operations(document) {
        for (status, response) in operation.responses.responses.iter_mut() {
            if let utoipa::openapi::RefOr::T(response) = response
                && response.description.is_empty()
            {
                let reason = status
                    .parse::<u16>()
                    .ok()
                    .and_then(|code| actix_web::http::StatusCode::from_u16(code).ok())
                    .and_then(|code| code.canonical_reason());
                response.description = reason.unwrap_or("Response").to_owned();
            }
        }
    }
}

/// Declares the refusals any operation of a kind can answer, where its
/// handler does not already: 401 and 403 where a credential is read, 400
/// where a query, path or body is read, 413 and 415 where a body is, and 503
/// (the database unreachable) everywhere but `/healthz`. Every one is an
/// error envelope.
fn document_common_errors(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{Ref, RefOr, content::Content, response::ResponseBuilder};
    let error = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    Content::new(Some(Ref::from_schema_name("ErrorEnvelope"))),
                )
                .build(),
        )
    };
    for (path, operation) in operations(document) {
        let credential = operation
            .security
            .as_ref()
            .is_some_and(|requirements| !requirements.is_empty());
        let reads_input = operation.parameters.as_ref().is_some_and(|p| !p.is_empty())
            || operation.request_body.is_some();
        let mut common = Vec::new();
        if credential {
            common.push(("401", "No valid credential"));
            common.push(("403", "The credential does not allow this"));
        }
        if reads_input {
            common.push(("400", "The request cannot be read"));
        }
        if operation.request_body.is_some() {
            common.push(("413", "The body is too large"));
            common.push(("415", "The body is not of a type the operation reads"));
        }
        if path != "/healthz" {
            common.push(("503", "The database is unavailable; retry later"));
        }
        for (status, description) in common {
            operation
                .responses
                .responses
                .entry(status.to_owned())
                .or_insert_with(|| error(description));
        }
    }
}

/// Every route of Tessera under `state.base_path`, with its middleware, for
/// an application of someone else's (embedding) or of our own (the empty
/// path). Requests under the path that match no route answer Tessera's 404.
pub fn scope(
    state: web::Data<AppState>,
    document: web::Data<AdminDocument>,
) -> actix_web::Scope<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let max_body = state.max_body_bytes;
    let base = state.base_path.clone();
    web::scope(&base)
        .configure(|config| configure(&mut ServiceConfig::new(config), &base))
        .app_data(state)
        .app_data(document)
        .app_data(web::PayloadConfig::new(max_body))
        .app_data(web::PathConfig::default().error_handler(|_, _| ApiError::not_found().into()))
        .app_data(web::QueryConfig::default().error_handler(|err, _| {
            let reason = err.to_string();
            let reason = reason.trim_start_matches("Query deserialize error: ");
            ApiError::new(Code::InvalidQuery, format!("Bad query parameter: {reason}")).into()
        }))
        .default_service(web::to(|| async {
            Err::<actix_web::HttpResponse, _>(ApiError::not_found())
        }))
        .wrap(middleware::envelope_errors())
        .wrap(middleware::security_headers())
        .wrap(actix_web::middleware::from_fn(middleware::consistency))
        .wrap(actix_web::middleware::from_fn(middleware::trace_request))
        .wrap(actix_web::middleware::from_fn(middleware::cors))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;
    use std::rc::Rc;

    use actix_web::{HttpRequest, HttpResponse, test};

    use super::*;

    /// Paths served outside the Admin API: the HTML pages and their assets.
    const PAGES: [&str; 16] = [
        "/admin/auth/",
        "/admin/docs",
        "/admin/help/",
        "/admin/dashboards/",
        "/admin/tables",
        "/admin/rows/",
        "/admin/people",
        "/admin/grants",
        "/admin/access",
        "/admin/settings",
        "/admin/audit",
        "/admin/workflows",
        "/admin/dataviews",
        "/admin/sql",
        "/admin/snapshot",
        "/admin/assets/",
    ];

    /// The end of the bracket group opening at `open`, string literals skipped.
    fn group_end(text: &str, open: usize) -> usize {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, c) in text.char_indices().skip_while(|(i, _)| *i < open) {
            match (in_string, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (_, false, '"') => in_string = !in_string,
                (false, _, '{' | '[' | '(') => depth += 1,
                (false, _, '}' | ']' | ')') => {
                    depth -= 1;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
        }
        text.len()
    }

    /// The full pattern of every resource under the `ResourceMap` whose Debug
    /// text is `node` (actix offers no listing of its routes).
    fn leaves(node: &str, prefix: &str, out: &mut BTreeSet<String>) {
        let start = node.find("patterns: Single(\"").unwrap() + 18;
        let end = start + node[start..].find("\")").unwrap();
        let pattern = format!("{prefix}{}", &node[start..end]);
        // Named resources are listed twice; the tree is in `nodes`.
        let named = node.find("named: {").unwrap() + 7;
        let rest = &node[group_end(node, named)..];
        let children = rest.find("nodes: ").unwrap() + 7;
        if rest[children..].starts_with("None") {
            out.insert(pattern);
            return;
        }
        let mut at = children;
        while let Some(found) = rest[at..].find("ResourceMap {") {
            let open = at + found + 12;
            let close = group_end(rest, open);
            leaves(&rest[at + found..=close], &pattern, out);
            at = close;
        }
    }

    /// `path` with each `{name}` segment written as `with`: `{}` compares
    /// actix's and OpenAPI's spellings, a value makes a request path.
    fn filled(path: &str, with: &str) -> String {
        path.split('/')
            .map(|s| if s.starts_with('{') { with } else { s })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[actix_web::test]
    async fn the_admin_document_lists_exactly_the_routes_the_server_mounts() {
        let map = Rc::new(RefCell::new(String::new()));
        let seen = map.clone();
        let (app, _) = routes().split_for_parts();
        let app = test::init_service(app.default_service(web::to(move |req: HttpRequest| {
            *seen.borrow_mut() = format!("{:?}", req.resource_map());
            async { HttpResponse::ImATeapot().finish() }
        })))
        .await;
        let document = openapi_document();
        // Every documented operation is routed (not left to the default service).
        for (path, item) in &document.paths.paths {
            let sample = filled(path, "0");
            let methods = [
                ("GET", item.get.is_some()),
                ("POST", item.post.is_some()),
                ("PUT", item.put.is_some()),
                ("PATCH", item.patch.is_some()),
                ("DELETE", item.delete.is_some()),
            ];
            for (method, _) in methods.iter().filter(|(_, documented)| *documented) {
                let request = test::TestRequest::default()
                    .method(method.parse().unwrap())
                    .uri(&sample)
                    .to_request();
                let status = test::call_service(&app, request).await.status();
                assert!(
                    status != 418 && status != 405,
                    "{method} {path} is documented but not routed"
                );
            }
        }
        test::call_service(
            &app,
            test::TestRequest::get().uri("/nothing/here").to_request(),
        )
        .await;
        let mut mounted = BTreeSet::new();
        leaves(&map.borrow(), "", &mut mounted);
        let api: BTreeSet<String> = mounted
            .iter()
            .filter(|path| !PAGES.iter().any(|page| path.starts_with(page)))
            .filter(|path| !matches!(path.as_str(), "/admin" | "/admin/"))
            .map(|path| filled(path, "{}"))
            .collect();
        let documented: BTreeSet<String> = document
            .paths
            .paths
            .keys()
            .map(|p| filled(p, "{}"))
            .collect();
        assert!(api.len() > 40, "{mounted:?}");
        assert_eq!(api, documented, "mounted routes and the document differ");
    }
}
