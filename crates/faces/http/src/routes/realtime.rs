//! `GET /api/realtime`: row changes the caller may see, as Server-Sent
//! Events (API.md section 11). Refusals come in the JSON envelope before
//! the stream starts.

use std::convert::Infallible;

use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, get, web};
use api_types::ErrorEnvelope;
use realtime::{EndReason, Subscription, SubscriptionRequest};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{LazyCaller, credential_required};

/// The realtime route's query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RealtimeQuery {
    /// Tables to follow: `schema.table[,schema.table...]`.
    subscribe: Option<String>,
    /// One Data API filter (JSON) for every listed table.
    filter: Option<String>,
    /// The credential, for clients that cannot send headers (EventSource);
    /// never logged.
    access_token: Option<String>,
    /// Resumes after this event id (as the `Last-Event-ID` header does).
    #[serde(rename = "lastEventId")]
    #[param(rename = "lastEventId")]
    last_event_id: Option<String>,
}

/// Streams `event: insert|update|delete` with `id:` and `data:
/// {"resource","row","old"?}` for every committed change the caller may
/// see on the listed tables; `: ping` every 15 s; `event: reset` when a
/// `Last-Event-ID` cannot be replayed; `event: overflow` before dropping a
/// client too slow to keep up.
#[utoipa::path(operation_id = "subscribeRealtime", tag = "realtime", security(("bearer" = [])),
    params(RealtimeQuery, ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id")),
    responses((status = 200, description = "A stream of Server-Sent Events", content_type = "text/event-stream", body = String),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 405, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
#[get("")]
pub async fn subscribe(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Option<LazyCaller>,
    query: web::Query<RealtimeQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let given = |value: Option<String>| value.filter(|v| !v.is_empty());
    let caller = caller
        .or_else(|| given(query.access_token).map(|token| LazyCaller::with_secret(&req, token)))
        .ok_or_else(credential_required)?;
    let request = caller.request();
    let last_event_id = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(query.last_event_id);
    let subscription = state
        .services
        .realtime
        .subscribe(SubscriptionRequest {
            bearer: request.bearer,
            zone_header: request.zone_header,
            subscribe: query.subscribe.as_deref(),
            filter: given(query.filter).as_deref(),
            last_event_id: last_event_id.as_deref(),
        })
        .await?;
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(frames(subscription)))
}

/// The subscription's frames, then `event: overflow` when it was dropped
/// for falling behind.
fn frames(
    subscription: Subscription,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> {
    futures_util::stream::unfold(Some(subscription), |state| async move {
        let mut subscription = state?;
        match subscription.frames.recv().await {
            Some(frame) => Some((
                Ok(Bytes::copy_from_slice(frame.as_bytes())),
                Some(subscription),
            )),
            None if subscription.end_reason() == EndReason::Overflow => {
                Some((Ok(Bytes::from_static(realtime::OVERFLOW.as_bytes())), None))
            }
            None => None,
        }
    })
}
