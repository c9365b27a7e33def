//! The HTTP face of Tessera: actix-web routes, extractors, the error envelope
//! and the OpenAPI document generated from the handlers.

mod convert;
pub mod error;
pub mod extract;
mod middleware;
mod respond;
pub mod routes;

pub use routes::admin::openapi::AdminDocument;

use std::net::IpAddr;
use std::sync::Arc;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, web};
use audit::AuditStore;
use auth::AuthService;
use futures_util::future::BoxFuture;
use kernel::Code;
use permissions::RoleService;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_actix_web::scope::scope;
use utoipa_actix_web::{AppExt, UtoipaApp};

use crate::error::ApiError;
use crate::routes::{
    account, admin, auth as auth_routes, data as data_routes, docs, health, pages,
    workflows as workflow_routes,
};

/// Answers whether the database is reachable.
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// Everything the handlers need, shared by all workers.
pub struct AppState {
    /// Sign-in, credentials, users and settings.
    pub auth: AuthService,
    /// Roles and memberships.
    pub roles: RoleService,
    /// Tables and resources.
    pub schema: schema::SchemaService,
    /// Grants.
    pub grants: permissions::GrantService,
    /// The Data API.
    pub data: data::DataService,
    /// Workflows.
    pub workflows: workflows::WorkflowService,
    /// The audit log.
    pub audit: Arc<dyn AuditStore>,
    /// The readiness probe.
    pub ready: ReadinessCheck,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpAddr>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
}

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

/// Every route.
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
        .map(pages::register)
        .map(docs::register)
        .service(health::healthz)
        .service(health::readyz)
        .service(
            scope("/api/auth")
                .service(auth_routes::login)
                .service(auth_routes::logout)
                .service(auth_routes::me)
                .service(auth_routes::update_me)
                .service(auth_routes::sessions)
                .service(auth_routes::end_session)
                .service(auth_routes::tokens)
                .service(auth_routes::create_token)
                .service(auth_routes::revoke_token)
                .service(account::register)
                .service(account::forgot_password)
                .service(account::reset_password)
                .service(account::change_password)
                .service(account::verify_email)
                .service(account::resend_verification)
                .service(account::accept_invitation),
        )
        .service(
            scope("/admin/api")
                .service(admin::users::list)
                .service(admin::users::create)
                .service(admin::users::get)
                .service(admin::users::update)
                .service(admin::users::remove)
                .service(admin::roles::list)
                .service(admin::roles::create)
                .service(admin::roles::get)
                .service(admin::roles::update)
                .service(admin::roles::remove)
                .service(admin::roles::members)
                .service(admin::roles::add_member)
                .service(admin::roles::remove_member)
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
                .service(admin::schema::resources)
                .service(admin::schema::register)
                .service(admin::schema::get_resource)
                .service(admin::schema::expose)
                .service(admin::grants::list)
                .service(admin::grants::create)
                .service(admin::grants::remove)
                .service(admin::workflows::list)
                .service(admin::workflows::create)
                .service(admin::workflows::get)
                .service(admin::workflows::update)
                .service(admin::workflows::remove)
                .service(admin::workflows::publish)
                .service(admin::workflows::test)
                .service(admin::workflows::runs)
                .service(admin::openapi::document)
                .service(admin::openapi_data::document),
        )
        .service(
            scope("/api/workflows")
                .service(workflow_routes::result)
                .service(workflow_routes::webhook_post)
                .service(workflow_routes::webhook_get)
                .route(
                    "/{slug}/webhook",
                    web::route().to(workflow_routes::other_method),
                ),
        )
        .service(
            scope("/api/data")
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
        )
}

/// The OpenAPI 3.1 document of every route, generated from the handlers.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let mut document = routes().split_for_parts().1;
    describe_responses(&mut document);
    document
}

/// OpenAPI requires a description on every response: a response declared
/// without one gets its status's reason phrase ("No Content", "Not Found").
fn describe_responses(document: &mut utoipa::openapi::OpenApi) {
    let operations = document.paths.paths.values_mut().flat_map(|item| {
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
    });
    for operation in operations {
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

/// The application of one worker.
pub fn app(
    state: web::Data<AppState>,
    document: web::Data<AdminDocument>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let max_body = state.max_body_bytes;
    let (app, _) = routes().split_for_parts();
    app.app_data(state)
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
        .wrap(actix_web::middleware::from_fn(middleware::trace_request))
        .wrap(actix_web::middleware::from_fn(middleware::cors))
}
