//! A host service that embeds Tessera: its routes under `/backend`, and one
//! route of the host's own, `GET /my/notes`, that authenticates the caller
//! through Tessera and reads `app.notes` under the caller's grants.
//! docs/embedding.md walks through it.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::http::header;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::{Value, json};
use tessera::data::{DataRequest, ListParams};
use tessera::http::error::ApiError;
use tessera::kernel::Code;
use tessera::{Config, Services, Tessera};

/// Where the host mounts Tessera.
pub const BASE_PATH: &str = "/backend";

/// The host, bound and not yet serving.
pub struct Host {
    /// Tessera's services, which the host's own routes call directly.
    pub services: Services,
    /// Tessera's routes and workers; [`Tessera::stop`] once the server ends.
    pub tessera: Tessera,
    /// The port the host listens on.
    pub port: u16,
    /// The server; await it to serve.
    pub server: Server,
}

/// Starts Tessera's services on `config` (migrating its database), mounts
/// its routes under [`BASE_PATH`] beside the host's own route, and binds
/// `bind`. Must run inside the Tokio runtime.
pub async fn start(config: &Config, bind: &str) -> anyhow::Result<Host> {
    let services =
        Services::start(&config.services(), Arc::new(tessera::kernel::SystemClock)).await?;
    let tessera = Tessera::new(config, &services, BASE_PATH)?;
    tessera.start_workers()?;
    let listener = TcpListener::bind(bind)?;
    let port = listener.local_addr()?.port();
    let shared = web::Data::new(services.clone());
    let routes = tessera.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(shared.clone())
            .route("/my/notes", web::get().to(my_notes))
            .service(routes.scope())
    })
    .listen(listener)?
    .run();
    Ok(Host {
        services,
        tessera,
        port,
        server,
    })
}

/// The host's own route: who the caller is and the notes they may read,
/// newest first. Tessera's refusals keep Tessera's envelope and status.
async fn my_notes(
    request: HttpRequest,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    let caller = services.sign_in.authenticate(bearer).await?;
    let params = ListParams {
        sort: Some("-id".into()),
        ..ListParams::default()
    };
    let as_caller = DataRequest {
        bearer,
        zone_header: None,
        ip: None,
    };
    let page = services
        .data
        .list(as_caller, "app", "notes", &params)
        .await?;
    let notes: Value = serde_json::from_str(&page.rows)
        .map_err(|_| ApiError::new(Code::Internal, "The rows could not be read"))?;
    tracing::info!(user = %caller.user_id, "listed the caller's notes");
    Ok(HttpResponse::Ok().json(json!({ "user": caller.user_id, "notes": notes })))
}
