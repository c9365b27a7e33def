//! Success answers in the envelope.

use actix_web::HttpResponse;
use serde::Serialize;

/// 200 `{ "data": data }`.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(api_types::DataEnvelope { data })
}

/// 201 `{ "data": data }`.
pub fn created<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Created().json(api_types::DataEnvelope { data })
}

/// 204 with no body.
pub fn no_content() -> HttpResponse {
    HttpResponse::NoContent().finish()
}
