//! Success answers in the envelope.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::ContentType;
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

/// `{ "data": <data> }` around JSON text written by the store (Data API rows).
pub fn json_data(status: StatusCode, data: &str) -> HttpResponse {
    enveloped(status, data, None)
}

/// `{ "data": <data>, "meta": <meta> }` around JSON texts.
pub fn json_data_meta(status: StatusCode, data: &str, meta: &str) -> HttpResponse {
    enveloped(status, data, Some(meta))
}

/// 200 `{ "data": [rows], "meta": { limit, offset, total? } }` of a Data API page.
pub fn json_page(page: data::Page) -> HttpResponse {
    let meta = api_types::RowsMeta {
        limit: page.limit,
        offset: page.offset,
        total: page.total,
    };
    // Serializing numbers into a string cannot fail.
    let meta = serde_json::to_string(&meta).unwrap_or_default();
    // The rows' own buffer becomes the body: a page near
    // `data.max_answer_bytes` is not copied whole again.
    let mut body = page.rows;
    body.reserve(ENVELOPE.len() + meta.len() + 10);
    body.insert_str(0, ENVELOPE);
    sent(StatusCode::OK, body, Some(&meta))
}

/// What opens every envelope.
const ENVELOPE: &str = "{\"data\":";

/// The envelope of the JSON texts `data` and `meta`.
fn enveloped(status: StatusCode, data: &str, meta: Option<&str>) -> HttpResponse {
    let meta_len = meta.map_or(0, |m| m.len() + 8);
    let mut body = String::with_capacity(data.len() + meta_len + 10);
    body.push_str(ENVELOPE);
    body.push_str(data);
    sent(status, body, meta)
}

/// `body` (the envelope opened and its data written) closed with `meta`,
/// and sent.
fn sent(status: StatusCode, mut body: String, meta: Option<&str>) -> HttpResponse {
    if let Some(meta) = meta {
        body.push_str(",\"meta\":");
        body.push_str(meta);
    }
    body.push('}');
    HttpResponse::build(status)
        .insert_header(ContentType::json())
        .body(body)
}
