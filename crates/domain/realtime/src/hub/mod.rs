//! The instance's one reader of the change log: it wakes on the log's
//! NOTIFY (or every half second), reads the events below the frontier, and
//! hands each subscriber the frames of what it may see. Subscribers that
//! see a table the same way (same grants, same filter, and the same user or
//! zone where the filters use `$USER` or `$PERIOD`) share one statement per
//! batch and the frames it gives.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use auth::SignInService;
use chrono::{DateTime, Utc};
use data::{Caller, DataService, Table};
use kernel::Versions;
use kernel::filter::Filter;
use permissions::{Access, Action, Plane, Principal};
use settings::SettingsService;
use tokio::sync::mpsc;
use uuid::Uuid;

mod members;

pub(crate) use self::members::{Join, Resume};
use self::members::{Member, view_key};
use crate::frame::{RESET, frame};
use crate::store::{EventRef, RealtimeStore};

/// Frames a subscriber may have waiting; past it, it is dropped.
pub(crate) const QUEUE: usize = 1024;
/// Most events a resume replays; past it, the client is told to reload.
const REPLAY_MAX: u64 = 1000;
/// Events read per look at the log.
const BATCH: u64 = 500;
/// The longest pause between two looks (revocations end streams within it).
const TICK: Duration = Duration::from_millis(500);
/// How often interests are renewed and old events pruned.
const KEEP_EVERY: Duration = Duration::from_secs(15);
/// Heartbeat comment, sent to every subscriber every [`KEEP_EVERY`].
const PING: &str = ": ping\n\n";
/// How often a batch read on state that changed meanwhile is read again.
const STALE_RETRIES: u32 = 3;
/// `ended` of a subscriber dropped for falling behind.
pub(crate) const OVERFLOWED: u8 = 1;

/// The hub of one instance; its task starts with the first subscriber.
pub(crate) struct Hub {
    store: Arc<dyn RealtimeStore>,
    data: DataService,
    auth: SignInService,
    settings: SettingsService,
    joins: OnceLock<mpsc::Sender<Join>>,
}

/// The hub's running state.
struct Runner {
    store: Arc<dyn RealtimeStore>,
    data: DataService,
    auth: SignInService,
    settings: SettingsService,
    members: Vec<Member>,
    /// Events up to this id were read; `None` while nobody listens.
    cursor: Option<i64>,
    seen: Option<Versions>,
    replay_seconds: u64,
}

impl Hub {
    pub(crate) fn new(
        store: Arc<dyn RealtimeStore>,
        data: DataService,
        auth: SignInService,
        settings: SettingsService,
    ) -> Self {
        Self {
            store,
            data,
            auth,
            settings,
            joins: OnceLock::new(),
        }
    }

    /// Hands `join` to the hub's task, starting it on first use.
    pub(crate) async fn join(&self, join: Join) {
        let joins = self.joins.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            let runner = Runner {
                store: self.store.clone(),
                data: self.data.clone(),
                auth: self.auth.clone(),
                settings: self.settings.clone(),
                members: Vec::new(),
                cursor: None,
                seen: None,
                replay_seconds: 300,
            };
            tokio::spawn(runner.run(receiver));
            sender
        });
        // The task ends only with the process: a failed send drops the
        // subscriber, whose stream then ends.
        let _ = joins.send(join).await;
    }
}

impl Runner {
    async fn run(mut self, mut joins: mpsc::Receiver<Join>) {
        let wake = self.store.wake();
        let mut kept = tokio::time::Instant::now();
        loop {
            tokio::select! {
                join = joins.recv() => match join {
                    Some(join) => self.admit(join).await,
                    None => return,
                },
                () = wake.notified() => {}
                () = tokio::time::sleep(TICK) => {}
            }
            self.end_streams().await;
            if self.members.is_empty() {
                self.cursor = None;
                continue;
            }
            if kept.elapsed() >= KEEP_EVERY {
                kept = tokio::time::Instant::now();
                self.keep().await;
                let ping: Arc<str> = Arc::from(PING);
                self.members.iter_mut().for_each(|m| m.push(&ping));
            }
            self.read_log().await;
        }
    }

    /// Ends the streams that are over (refused, dropped, closed by their
    /// client, or past their credential's expiry) and gives their slots back.
    async fn end_streams(&mut self) {
        let now = self.auth.now();
        let mut ended = Vec::new();
        self.members.retain(|m| {
            let over = m.gone || m.join.sender.is_closed() || m.join.expires_at <= now;
            if over {
                ended.push(m.join.stream);
            }
            !over
        });
        if !ended.is_empty()
            && let Err(error) = self.store.release_streams(&ended).await
        {
            tracing::warn!(%error, "realtime: giving back stream slots failed");
        }
    }

    /// Every resource someone watches.
    fn resources(&self) -> Vec<Uuid> {
        let mut all: Vec<Uuid> = self
            .members
            .iter()
            .flat_map(|m| m.join.watches.iter().map(|w| w.table.resource_id))
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Renews the interest in every watched table and prunes the log.
    async fn keep(&mut self) {
        let resources = self.resources();
        if let Err(error) = self.keep_tables(&resources).await {
            tracing::warn!(%error, "realtime: renewing interests failed");
        }
        if let Err(error) = self.store.prune(self.replay_seconds).await {
            tracing::warn!(%error, "realtime: pruning the change log failed");
        }
        let streams: Vec<Uuid> = self.members.iter().map(|m| m.join.stream).collect();
        if let Err(error) = self.store.renew_streams(&streams).await {
            tracing::warn!(%error, "realtime: renewing stream slots failed");
        }
    }

    /// Keeps the changes of `resources` through the replay window (read
    /// afresh from the settings) and a margin of renewals.
    async fn keep_tables(&mut self, resources: &[Uuid]) -> Result<(), kernel::StoreError> {
        if let Ok(settings) = self.settings.current().await {
            self.replay_seconds = settings.realtime_replay_seconds();
        }
        let keep_for = self.replay_seconds + KEEP_EVERY.as_secs() * 4;
        self.store.keep(resources, keep_for).await
    }

    /// Takes a subscriber in: its tables captured, then its replay.
    async fn admit(&mut self, mut join: Join) {
        let admitted = join.admitted.take();
        let taken = self.take_in(join).await;
        if let Some(admitted) = admitted {
            let _ = admitted.send(taken);
        }
    }

    /// [`Runner::admit`]; answers whether the subscriber is in.
    async fn take_in(&mut self, join: Join) -> bool {
        let resources: Vec<Uuid> = join.watches.iter().map(|w| w.table.resource_id).collect();
        if let Err(error) = self.keep_tables(&resources).await {
            tracing::warn!(%error, "realtime: capturing a table failed");
            return false;
        }
        let cursor = match self.cursor {
            Some(cursor) => cursor,
            None => match self.store.poll(i64::MAX, &[], 1).await {
                Ok(poll) => {
                    self.seen = Some(poll.versions);
                    poll.frontier - 1
                }
                Err(error) => {
                    tracing::warn!(%error, "realtime: reading the change log failed");
                    return false;
                }
            },
        };
        self.cursor = Some(cursor);
        // Resolved at another auth version than the hub last saw: a change
        // between the two (a revocation the hub already handled) is checked
        // for this subscriber too, once it is in.
        let recheck = self.seen.is_none_or(|seen| seen.auth != join.auth_version);
        let mut member = Member {
            after: cursor,
            join,
            gone: false,
        };
        let reset: Arc<str> = Arc::from(RESET);
        match member.join.resume {
            Resume::Live => {}
            Resume::Reset => member.push(&reset),
            Resume::After(id) => {
                let replay = match self.store.replayable(id, self.replay_seconds).await {
                    Ok(true) => self
                        .store
                        .between(id, cursor, &resources, REPLAY_MAX + 1)
                        .await
                        .ok()
                        .filter(|events| events.len() as u64 <= REPLAY_MAX),
                    _ => None,
                };
                match (replay, self.seen) {
                    (Some(events), Some(versions)) => {
                        member.after = id;
                        let mut alone = vec![member];
                        // A replay read on changed state is not retried: the
                        // client reloads instead.
                        if !self.dispatch(&events, versions, &mut alone).await {
                            alone[0].push(&reset);
                        }
                        member = alone.remove(0);
                        member.after = member.after.max(cursor);
                    }
                    _ => member.push(&reset),
                }
            }
        }
        self.members.push(member);
        if recheck {
            self.recheck_callers().await;
        }
        true
    }

    /// Reads the log up to the frontier and dispatches what it holds.
    async fn read_log(&mut self) {
        let resources = self.resources();
        let mut stale_reads = 0;
        loop {
            let Some(cursor) = self.cursor else { return };
            let poll = match self.store.poll(cursor, &resources, BATCH).await {
                Ok(poll) => poll,
                Err(error) => {
                    tracing::warn!(%error, "realtime: reading the change log failed");
                    return;
                }
            };
            if self
                .seen
                .is_some_and(|seen| seen.auth != poll.versions.auth)
            {
                self.recheck_callers().await;
            }
            if self.seen.is_some_and(|seen| seen != poll.versions) {
                self.recheck_grants().await;
            }
            self.seen = Some(poll.versions);
            let full = poll.events.len() as u64 >= BATCH;
            let mut members = std::mem::take(&mut self.members);
            let current = self
                .dispatch(&poll.events, poll.versions, &mut members)
                .await;
            self.members = members;
            if !current && stale_reads < STALE_RETRIES {
                // The same events again, on the new state; members that got
                // them are past them already.
                stale_reads += 1;
                continue;
            }
            stale_reads = 0;
            self.cursor = Some(match poll.events.last() {
                Some(last) if full => last.id,
                _ => cursor.max(poll.frontier - 1),
            });
            if !full {
                return;
            }
        }
    }

    /// Resolves every subscriber's credential afresh: a revoked one, or an
    /// account or role that no longer gives API access, ends the stream.
    async fn recheck_callers(&mut self) {
        let mut resolved: HashMap<String, Option<(Principal, DateTime<Utc>)>> = HashMap::new();
        for member in &mut self.members {
            if !resolved.contains_key(&member.join.bearer) {
                let principal = match self.auth.resolve(&member.join.bearer).await {
                    Ok(found) => found
                        .principal
                        .authorize(Plane::Api, false)
                        .is_ok()
                        .then_some((found.principal, found.expires_at)),
                    Err(_) => None,
                };
                resolved.insert(member.join.bearer.clone(), principal);
            }
            match resolved.get(&member.join.bearer).cloned().flatten() {
                Some((principal, expires_at)) => {
                    member.join.principal = principal;
                    member.join.expires_at = expires_at;
                }
                None => member.gone = true,
            }
        }
    }

    /// Ends the streams of subscribers that may no longer read one of
    /// their tables: dropped, hidden, not exposed for GET, or no read grant.
    async fn recheck_grants(&mut self) {
        for member in &mut self.members {
            for watch in &member.join.watches {
                let readable = match self
                    .data
                    .table(&watch.table.schema, &watch.table.name)
                    .await
                {
                    Ok(Some(table)) => {
                        table.exposes("GET")
                            && Access::evaluate(&member.join.principal, &table.scopes, Action::Read)
                                .is_ok()
                    }
                    Ok(None) => false,
                    // Unknown for now: checked again with the next change.
                    Err(_) => true,
                };
                if !readable {
                    member.gone = true;
                }
            }
        }
    }

    /// Hands `members` the frames of `events`, table by table.
    /// Answers false when some view was read on state that changed
    /// meanwhile: its members got nothing of this batch, to be read again.
    async fn dispatch(
        &self,
        events: &[EventRef],
        versions: Versions,
        members: &mut [Member],
    ) -> bool {
        let mut by_resource: Vec<(Uuid, Vec<&EventRef>)> = Vec::new();
        for event in events {
            match by_resource
                .iter_mut()
                .find(|(r, _)| *r == event.resource_id)
            {
                Some((_, list)) => list.push(event),
                None => by_resource.push((event.resource_id, vec![event])),
            }
        }
        // Frames of every member, merged back into id order below.
        let mut frames: Vec<Vec<(i64, Arc<str>)>> = vec![Vec::new(); members.len()];
        let mut stale = vec![false; members.len()];
        for (resource, events) in by_resource {
            self.dispatch_table(
                resource,
                &events,
                versions,
                members,
                &mut frames,
                &mut stale,
            )
            .await;
        }
        for ((member, mut frames), stale) in members.iter_mut().zip(frames).zip(&stale) {
            if *stale {
                continue;
            }
            frames.sort_by_key(|(id, _)| *id);
            for (_, frame) in &frames {
                if member.gone {
                    break;
                }
                member.push(frame);
            }
            if let Some(last) = events.last() {
                member.after = member.after.max(last.id);
            }
        }
        !stale.contains(&true)
    }

    /// The frames of one table's `events` for each member watching it.
    async fn dispatch_table(
        &self,
        resource: Uuid,
        events: &[&EventRef],
        versions: Versions,
        members: &mut [Member],
        frames: &mut [Vec<(i64, Arc<str>)>],
        stale: &mut [bool],
    ) {
        // The table as the catalog holds it now, by any member's watch.
        let Some(watch) = members.iter().find_map(|m| m.watching(resource)) else {
            return;
        };
        let (schema, name) = (watch.table.schema.clone(), watch.table.name.clone());
        let table = match self.data.table(&schema, &name).await {
            Ok(Some(table)) if table.exposes("GET") => table,
            Ok(_) => {
                // Dropped, hidden or no longer readable with GET: its streams end.
                for member in members
                    .iter_mut()
                    .filter(|m| m.watching(resource).is_some())
                {
                    member.gone = true;
                }
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "realtime: reading the catalog failed");
                return;
            }
        };
        let mut views: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, member) in members.iter_mut().enumerate() {
            let Some(watch) = member.watching(resource) else {
                continue;
            };
            if member.gone {
                continue;
            }
            if Access::evaluate(&member.join.principal, &table.scopes, Action::Read).is_err() {
                // No read grant left on a listed table: the stream ends.
                member.gone = true;
                continue;
            }
            let key = view_key(&member.join, &table, watch.filter.as_ref());
            views.entry(key).or_default().push(index);
        }
        let resource_name = format!("{schema}.{name}");
        let key: Vec<&str> = table
            .key
            .iter()
            .filter_map(|&i| table.columns.get(i).map(|c| c.name.as_str()))
            .collect();
        for indexes in views.into_values() {
            let Some(&first) = indexes.first() else {
                continue;
            };
            let after = indexes
                .iter()
                .map(|&i| members[i].after)
                .min()
                .unwrap_or(i64::MAX);
            let ids: Vec<i64> = events
                .iter()
                .map(|e| e.id)
                .filter(|id| *id > after)
                .collect();
            if ids.is_empty() {
                continue;
            }
            let viewer = &members[first].join;
            let Some(watch) = members[first].watching(resource) else {
                continue;
            };
            let rows = match self
                .rows(viewer, &table, watch.filter.as_ref(), versions, &ids)
                .await
            {
                Ok(rows) => rows,
                Err(data::DataError::Store(kernel::StoreError::Stale)) => {
                    indexes.iter().for_each(|&i| stale[i] = true);
                    continue;
                }
                Err(error) => {
                    tracing::warn!(%error, "realtime: reading the changed rows failed");
                    continue;
                }
            };
            for event in events.iter().filter(|e| ids.contains(&e.id)) {
                let (new, old) = rows.get(&event.id).cloned().unwrap_or_default();
                let Some(text) = frame(
                    event.id,
                    &event.kind,
                    &resource_name,
                    &key,
                    new.as_deref(),
                    old.as_deref(),
                ) else {
                    continue;
                };
                let text: Arc<str> = Arc::from(text);
                for &i in &indexes {
                    if event.id > members[i].after {
                        frames[i].push((event.id, text.clone()));
                    }
                }
            }
        }
    }

    /// The rows of events `ids` that `viewer` sees, by event: (after, before).
    async fn rows(
        &self,
        viewer: &Join,
        table: &Table,
        filter: Option<&Filter>,
        versions: Versions,
        ids: &[i64],
    ) -> Result<HashMap<i64, (Option<String>, Option<String>)>, data::DataError> {
        let access = Access::evaluate(&viewer.principal, &table.scopes, Action::Read)?;
        let query = data::rows_seen_by(table, &access, filter);
        let caller = Caller {
            principal: &viewer.principal,
            zone_header: viewer.zone_header.as_deref(),
            ip: None,
        };
        let mut context = self
            .data
            .context_at(caller, versions.auth, versions.catalog)
            .await?;
        context.versions = versions;
        let changes = self
            .store
            .changes(table, &query, &context, ids)
            .await
            .map_err(data::DataError::Store)?;
        let mut rows: HashMap<i64, (Option<String>, Option<String>)> = HashMap::new();
        for change in changes {
            let slot = rows.entry(change.event).or_default();
            if change.new {
                slot.0 = Some(change.row);
            } else {
                slot.1 = Some(change.row);
            }
        }
        Ok(rows)
    }
}
