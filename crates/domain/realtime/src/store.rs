//! What realtime asks of its store: the change log and the rows of its
//! events as a subscriber would see them.

use async_trait::async_trait;
use data::{Context, ListQuery, Table};
use kernel::{StoreError, Versions};
use uuid::Uuid;

/// An event of the change log, without its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRef {
    /// Its id: ordered the same way on every instance.
    pub id: i64,
    /// The resource whose table changed.
    pub resource_id: Uuid,
    /// `insert`, `update` or `delete`.
    pub kind: String,
}

/// One look at the change log.
#[derive(Debug, Clone, PartialEq)]
pub struct Poll {
    /// The shared state's versions, read in the same statement.
    pub versions: Versions,
    /// Every event with a smaller id is committed (or never will be): the
    /// log below it is final.
    pub frontier: i64,
    /// Events after the cursor and below the frontier, in id order.
    pub events: Vec<EventRef>,
}

/// A row of an event that a subscriber's view reaches, shaped as the list
/// route shapes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The event.
    pub event: i64,
    /// The row after the change (else the row before it).
    pub new: bool,
    /// The row, as JSON text.
    pub row: String,
}

/// The change log and its reads.
#[async_trait]
pub trait RealtimeStore: Send + Sync + 'static {
    /// Keeps the changes of `resources` for `seconds` from now, capturing
    /// them first where they are not yet.
    async fn keep(&self, resources: &[Uuid], seconds: u64) -> Result<(), StoreError>;
    /// Forgets events older than `seconds`, and interests that ended.
    async fn prune(&self, seconds: u64) -> Result<(), StoreError>;
    /// Events of `resources` after `after`, at most `limit`, with the
    /// frontier and the versions.
    async fn poll(&self, after: i64, resources: &[Uuid], limit: u64) -> Result<Poll, StoreError>;
    /// Events of `resources` in `(after, until]`, at most `limit`.
    async fn between(
        &self,
        after: i64,
        until: i64,
        resources: &[Uuid],
        limit: u64,
    ) -> Result<Vec<EventRef>, StoreError>;
    /// Whether event `id` is in the log and younger than `seconds`.
    async fn replayable(&self, id: i64, seconds: u64) -> Result<bool, StoreError>;
    /// The rows of `events` (on `table`) that `query` reaches, with its
    /// columns and masks, checked against `context`'s versions.
    async fn changes(
        &self,
        table: &Table,
        query: &ListQuery<'_>,
        context: &Context,
        events: &[i64],
    ) -> Result<Vec<Change>, StoreError>;
    /// Takes stream slot `id` for `user` when fewer than `limit` of the
    /// user's streams are open on any instance; answers whether it did.
    async fn take_stream(&self, id: Uuid, user: Uuid, limit: u64) -> Result<bool, StoreError>;
    /// Marks streams `ids` as still open (an instance renews its own).
    async fn renew_streams(&self, ids: &[Uuid]) -> Result<(), StoreError>;
    /// Gives back the slots of streams `ids`, which ended.
    async fn release_streams(&self, ids: &[Uuid]) -> Result<(), StoreError>;
    /// Wakes whenever a change is logged (the instance's one LISTEN).
    fn wake(&self) -> std::sync::Arc<tokio::sync::Notify>;
}
