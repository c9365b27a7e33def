//! Liveness and readiness probes.

use actix_web::{HttpResponse, get, web};
use api_types::Health;

use crate::AppState;

/// The process is up.
#[utoipa::path(operation_id = "getHealth", tag = "health", responses((status = 200, body = Health)))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: "ok".into(),
    })
}

/// The database answers.
#[utoipa::path(operation_id = "getReadiness", tag = "health", responses((status = 200, body = Health), (status = 503, body = Health)))]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    if (state.ready)().await {
        HttpResponse::Ok().json(Health {
            status: "ok".into(),
        })
    } else {
        HttpResponse::ServiceUnavailable().json(Health {
            status: "unavailable".into(),
        })
    }
}
