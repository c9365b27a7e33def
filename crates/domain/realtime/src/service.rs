//! Subscribing: the checks of the list route for every table asked for,
//! the instance's limit, then a place in the hub.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use auth::SignInService;
use data::{Caller, DataService};
use kernel::FieldError;
use permissions::Plane;
use settings::SettingsService;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::RealtimeError;
use crate::hub::{Hub, Join, Resume};
use crate::store::RealtimeStore;

/// Most tables one subscription may name.
const TABLES_MAX: usize = 20;

/// A subscription as asked for over HTTP.
#[derive(Debug, Clone, Copy)]
pub struct SubscriptionRequest<'a> {
    /// The credential (`Authorization` bearer or `access_token`).
    pub bearer: &'a str,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
    /// `schema.table[,schema.table...]`.
    pub subscribe: Option<&'a str>,
    /// One Data API filter for every table.
    pub filter: Option<&'a str>,
    /// `Last-Event-ID` (header or `lastEventId`).
    pub last_event_id: Option<&'a str>,
}

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The subscriber's credential, roles or grants no longer allow it.
    Closed,
    /// The subscriber fell too far behind and was dropped.
    Overflow,
}

/// An open stream: its frames, ready to write.
pub struct Subscription {
    /// Frames of Server-Sent Events, in order.
    pub frames: mpsc::Receiver<Arc<str>>,
    ended: Arc<AtomicU8>,
    open: Arc<AtomicUsize>,
}

impl Subscription {
    /// Why the frames ended (once `frames` answers `None`).
    pub fn end_reason(&self) -> EndReason {
        if self.ended.load(Ordering::Acquire) == crate::hub::OVERFLOWED {
            EndReason::Overflow
        } else {
            EndReason::Closed
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Realtime subscriptions of one instance.
#[derive(Clone)]
pub struct RealtimeService {
    store: Arc<dyn RealtimeStore>,
    data: DataService,
    auth: SignInService,
    settings: SettingsService,
    hub: Arc<Hub>,
    open: Arc<AtomicUsize>,
}

impl RealtimeService {
    /// The service over `store`; callers are resolved through `auth`, tables
    /// and grants through `data`.
    pub fn new(
        store: Arc<dyn RealtimeStore>,
        data: DataService,
        auth: SignInService,
        settings: SettingsService,
    ) -> Self {
        Self {
            hub: Arc::new(Hub::new(
                store.clone(),
                data.clone(),
                auth.clone(),
                settings.clone(),
            )),
            store,
            data,
            auth,
            settings,
            open: Arc::default(),
        }
    }

    /// Opens a stream of the changes the caller may see on the tables
    /// `subscribe` names, refused as the list route would refuse a read of
    /// any of them; 503 past `realtime.max_subscribers`, 429 past the
    /// user's `realtime.max_subscribers_per_user` (on all instances).
    pub async fn subscribe(
        &self,
        request: SubscriptionRequest<'_>,
    ) -> Result<Subscription, RealtimeError> {
        let names = parse_subscribe(request.subscribe)?;
        // The credential as the database holds it now, never a remembered
        // caller: a stream outlives the request that opened it.
        let resolved = self
            .auth
            .resolve(request.bearer)
            .await
            .map_err(data::DataError::from)?;
        resolved
            .principal
            .authorize(Plane::Api, false)
            .map_err(data::DataError::from)?;
        let caller = Caller {
            principal: &resolved.principal,
            zone_header: request.zone_header,
            ip: None,
        };
        let mut watches = Vec::with_capacity(names.len());
        for (schema, table) in names {
            watches.push(
                self.data
                    .watch(caller, schema, table, request.filter)
                    .await?,
            );
        }
        let settings = self
            .settings
            .current()
            .await
            .map_err(data::DataError::from)?;
        let max = settings.realtime_max_subscribers();
        if self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .is_err()
        {
            return Err(RealtimeError::Full);
        }
        let (sender, frames) = mpsc::channel(crate::hub::QUEUE);
        let ended = Arc::new(AtomicU8::new(0));
        let subscription = Subscription {
            frames,
            ended: ended.clone(),
            open: self.open.clone(),
        };
        let stream = Uuid::now_v7();
        let per_user = settings.realtime_max_subscribers_per_user();
        if !self
            .store
            .take_stream(stream, resolved.principal.user_id, per_user)
            .await
            .map_err(data::DataError::Store)?
        {
            return Err(RealtimeError::TooManyStreams);
        }
        let resume = match request.last_event_id {
            None => Resume::Live,
            Some(text) => text.trim().parse().map_or(Resume::Reset, Resume::After),
        };
        let (admitted, on_admission) = tokio::sync::oneshot::channel();
        self.hub
            .join(Join {
                stream,
                principal: watches[0].principal.clone(),
                expires_at: resolved.expires_at,
                auth_version: resolved.versions.auth,
                watches,
                bearer: request.bearer.to_owned(),
                zone_header: request.zone_header.map(str::to_owned),
                resume,
                sender,
                ended,
                admitted: Some(admitted),
            })
            .await;
        // Answered only once in: every change committed after reaches it.
        match on_admission.await {
            Ok(true) => Ok(subscription),
            _ => {
                if let Err(error) = self.store.release_streams(&[stream]).await {
                    tracing::warn!(%error, "realtime: giving back a stream slot failed");
                }
                Err(RealtimeError::Unready)
            }
        }
    }
}

/// `schema.table[,schema.table...]`: at least one, at most [`TABLES_MAX`], no repeats.
fn parse_subscribe(raw: Option<&str>) -> Result<Vec<(&str, &str)>, RealtimeError> {
    let refuse = |why: &'static str| RealtimeError::Query(FieldError::new("subscribe", why));
    let raw = raw
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| refuse("is required: schema.table[,schema.table...]"))?;
    let mut names: Vec<(&str, &str)> = Vec::new();
    for item in raw.split(',').map(str::trim) {
        let (schema, table) = item
            .split_once('.')
            .filter(|(s, t)| !s.is_empty() && !t.is_empty() && !t.contains('.'))
            .ok_or_else(|| refuse("must list tables as schema.table, separated by commas"))?;
        if !names.contains(&(schema, table)) {
            names.push((schema, table));
        }
    }
    if names.len() > TABLES_MAX {
        return Err(refuse("names too many tables (at most 20)"));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_lists_schema_qualified_tables() {
        assert_eq!(
            parse_subscribe(Some("app.notes, app.tasks,app.notes")).unwrap(),
            [("app", "notes"), ("app", "tasks")]
        );
        for bad in [
            None,
            Some(""),
            Some(" "),
            Some("notes"),
            Some("app."),
            Some(".x"),
            Some("a.b.c"),
            Some("app.notes,"),
        ] {
            assert!(
                matches!(parse_subscribe(bad), Err(RealtimeError::Query(_))),
                "{bad:?}"
            );
        }
    }
}
