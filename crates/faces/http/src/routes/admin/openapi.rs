//! The Admin API's own OpenAPI 3.1 document, for administrators.

use actix_web::web::Bytes;
use actix_web::{HttpResponse, get, web};
use api_types::ErrorEnvelope;

use crate::extract::{AdminPlane, Caller};

/// The document, serialized once at start and shared by the workers.
pub struct AdminDocument(Bytes);

impl AdminDocument {
    /// The document of every route served under `base_path` (empty, or
    /// `/prefix`, then named as the document's server), serialized once for
    /// every worker to share.
    pub fn shared(base_path: &str) -> web::Data<Self> {
        let mut openapi = crate::openapi_document();
        if !base_path.is_empty() {
            openapi.servers = Some(vec![utoipa::openapi::server::Server::new(base_path)]);
        }
        web::Data::new(Self(Bytes::from(
            serde_json::to_vec(&openapi).unwrap_or_default(),
        )))
    }
}

/// This document: every route of the Admin API, authentication and health.
#[utoipa::path(operation_id = "getAdminDocument", tag = "docs", security(("bearer" = [])),
    responses((status = 200, description = "OpenAPI 3.1 document"), (status = 401, body = ErrorEnvelope),
        (status = 403, body = ErrorEnvelope)))]
#[get("/openapi")]
pub async fn document(
    serialized: web::Data<AdminDocument>,
    _caller: Caller<AdminPlane>,
) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(serialized.0.clone())
}
