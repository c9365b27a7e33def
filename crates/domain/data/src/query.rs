//! What the Data API asks of its store: parsed, checked and permission-scoped
//! queries that the store turns into one SQL statement each.

use async_trait::async_trait;
use audit::AuditEvent;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use kernel::filter::Filter;
use kernel::{StoreError, Versions};
use serde_json::{Map, Value};
use std::sync::Arc;
use uuid::Uuid;

use crate::rpc::{Callable, FunctionCall};
use crate::table::{Column, Table};

/// Where variables take their values from.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// `$USER.*` reads this user's row (the token's owner for a token).
    pub user_id: Uuid,
    /// The instant `$PERIOD.*` is computed at.
    pub now: DateTime<Utc>,
    /// The caller's zone, where days are cut.
    pub zone: Tz,
    /// The shared state the request was planned on: the caller's
    /// credential, the table and the settings. A read answers only while
    /// they are current, else fails with [`StoreError::Stale`].
    pub versions: Versions,
    /// The largest answer a statement may build (`data.max_answer_bytes`):
    /// past it, [`StoreError::AnswerTooLarge`] while it is built.
    pub max_answer_bytes: u64,
}

/// The settings a statement's [`Context`] reads, with their version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementSettings {
    /// `system.timezone`.
    pub timezone: Option<String>,
    /// The settings version they were read at.
    pub version: i64,
    /// `data.max_answer_bytes`.
    pub max_answer_bytes: u64,
}

/// A row condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate<'a> {
    /// Every part holds (true when empty).
    All(Vec<Predicate<'a>>),
    /// Some part holds (false when empty).
    Any(Vec<Predicate<'a>>),
    /// A grant's filter, on the stored values.
    Filter(&'a Filter),
    /// The caller's own filter: a column masked on a row (see [`Output`])
    /// compares as null there, so filtering reveals no hidden value.
    Own(&'a Filter),
    /// The primary key equals these values (text, cast to each column's type).
    Key(Vec<(&'a Column, &'a str)>),
}

impl<'a> Predicate<'a> {
    /// OR of grant filters; `None` (no limit) stays out of the condition.
    pub fn any_of(filters: Option<Vec<&'a Filter>>) -> Option<Self> {
        filters.map(|list| Predicate::Any(list.into_iter().map(Predicate::Filter).collect()))
    }
}

/// A column of the answer; `mask` hides it on rows that none of the filters
/// (the grants covering it) match.
#[derive(Debug, Clone, PartialEq)]
pub struct Output<'a> {
    /// The column.
    pub column: &'a Column,
    /// `None`: shown on every row.
    pub mask: Option<Vec<&'a Filter>>,
}

/// How a write shows the rows it wrote: as the caller's read grants show
/// them, the key columns alone on rows they do not reach.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Shown<'a> {
    /// Columns of a row the read grants reach, masked as a read masks them.
    pub columns: Vec<Output<'a>>,
    /// The read grants' row filters (`None`: every row is reached).
    pub reach: Option<Vec<&'a Filter>>,
    /// The key columns, all a row outside `reach` shows.
    pub keys: Vec<Output<'a>>,
}

/// Rows of a related table shown inside each row of a read, under the
/// caller's grants on that table (API.md 13).
#[derive(Debug, Clone, PartialEq)]
pub struct Embed<'a> {
    /// The key it is shown under.
    pub alias: &'a str,
    /// The related table.
    pub table: &'a Table,
    /// An array of the related rows (sorted by key, at most
    /// [`EMBED_ROWS_MAX`]) rather than one object or null.
    pub many: bool,
    /// The column of the row it is embedded in, as the caller sees it...
    pub parent: Output<'a>,
    /// ...equal to this column of the related rows, as the caller sees it.
    pub child: Output<'a>,
    /// Columns of each related row.
    pub select: Vec<Output<'a>>,
    /// The related rows the caller may read (its grants' row filters).
    pub predicate: Predicate<'a>,
    /// Embeds inside it.
    pub embeds: Vec<Embed<'a>>,
}

/// Most related rows a to-many embed shows per row.
pub const EMBED_ROWS_MAX: u32 = 100;

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// Rows (`count()`) or non-null values.
    Count,
    /// Sum of numbers.
    Sum,
    /// Mean of numbers.
    Avg,
    /// Least value.
    Min,
    /// Greatest value.
    Max,
}

impl Function {
    /// The SQL function's name.
    pub fn sql(self) -> &'static str {
        match self {
            Function::Count => "count",
            Function::Sum => "sum",
            Function::Avg => "avg",
            Function::Min => "min",
            Function::Max => "max",
        }
    }
}

/// One `alias:fn(column)` of an aggregate read.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate<'a> {
    /// The answer's key.
    pub alias: &'a str,
    /// The function.
    pub function: Function,
    /// Its argument as the caller sees it; `None`: `count()` of rows.
    pub column: Option<Output<'a>>,
}

/// An aggregate read: one row per group of the rows the caller reads.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateQuery<'a> {
    /// Group columns, as the caller sees them (a hidden cell is null).
    pub group_by: Vec<Output<'a>>,
    /// The aggregates.
    pub aggregates: Vec<Aggregate<'a>>,
    /// Rows aggregated.
    pub predicate: Predicate<'a>,
    /// Masked columns, which the caller's filter reads through.
    pub masks: Vec<Output<'a>>,
    /// Sort keys: names of the answer's keys (group columns and aliases),
    /// descending when true.
    pub sort: Vec<(&'a str, bool)>,
    /// Groups per page.
    pub limit: u32,
    /// Groups skipped.
    pub offset: u64,
    /// Adds the number of groups.
    pub count: bool,
}

/// A list read.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery<'a> {
    /// Columns of each row.
    pub select: Vec<Output<'a>>,
    /// Related rows shown in each row.
    pub embeds: Vec<Embed<'a>>,
    /// Rows.
    pub predicate: Predicate<'a>,
    /// Sort keys, descending when true; the key is appended for a stable order.
    /// Masked columns sort by their masked value.
    pub sort: Vec<(&'a Column, bool)>,
    /// Every readable column that is hidden on some rows, with its mask; the
    /// caller's filter and sort read these columns through it.
    pub masks: Vec<Output<'a>>,
    /// Page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Adds `meta.total`.
    pub count: bool,
}

/// A read of rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Read<'a> {
    /// A page of rows.
    List(ListQuery<'a>),
    /// The row matching.
    One {
        /// Its columns.
        select: Vec<Output<'a>>,
        /// Related rows shown in it.
        embeds: Vec<Embed<'a>>,
        /// The row.
        predicate: Predicate<'a>,
    },
    /// Groups of rows with aggregates.
    Aggregate(AggregateQuery<'a>),
}

/// What a read found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// The rows as JSON text: a list's array, or one row's object; `None`
    /// when no row matched.
    pub json: Option<String>,
    /// Every row matching a list read, when it asked for the count.
    pub total: Option<i64>,
}

/// A change to rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<'a> {
    /// Inserts rows that all name the same columns.
    Insert {
        /// Columns given.
        columns: Vec<&'a Column>,
        /// The rows.
        rows: Vec<&'a Map<String, Value>>,
        /// Rows whose unique key is taken update the existing row instead.
        upsert: Option<Upsert<'a>>,
    },
    /// Inserts the rows a CSV import staged ([`ImportTransaction::stage`])
    /// at lines `first..=last`, in their order, each value parsed by
    /// PostgreSQL as its column's type with the column's modifier. Its
    /// answer is the number of rows written, not the rows, and its audit
    /// entry holds their count, not their keys (the event's details say
    /// which lines they were). Only an [`ImportTransaction`] runs it.
    InsertStaged {
        /// The staged rows' columns, in the header's order.
        columns: Vec<&'a Column>,
        /// The first and last line inserted.
        lines: (u64, u64),
    },
    /// Sets columns on the rows matching.
    Update {
        /// Columns given, with the row holding their values.
        columns: Vec<&'a Column>,
        /// The values.
        values: &'a Map<String, Value>,
        /// Rows changed.
        predicate: Predicate<'a>,
    },
    /// Deletes the rows matching.
    Delete {
        /// Rows deleted.
        predicate: Predicate<'a>,
    },
}

/// How an insert updates the rows whose unique key is already taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Upsert<'a> {
    /// The unique key's columns.
    pub conflict: Vec<&'a Column>,
    /// The columns set on an existing row (the given columns but the key's).
    pub set: Vec<&'a Column>,
    /// An existing row must match one of these update grants' filters, and
    /// so must its new version, else nothing is written; `None`: no check.
    /// [`Write::check`] then applies to the rows inserted only.
    pub check: Option<Vec<&'a Filter>>,
    /// Every row ran the update hooks on the row its key found: a row
    /// inserted instead (that row went meanwhile) fails the statement as
    /// stale ([`StoreError::Stale`]), so the write is planned again and
    /// the row runs the insert hooks.
    pub updates_only: bool,
}

/// A change with its permission check and audit entry.
#[derive(Debug, Clone)]
pub struct Write<'a> {
    /// What to change.
    pub change: Change<'a>,
    /// Each new or changed row must match one of these filters, else nothing
    /// is written; `None`: no check.
    pub check: Option<Vec<&'a Filter>>,
    /// The rows written as the answer shows them.
    pub returning: Shown<'a>,
    /// The writer is no administrator: a created or changed row that puts a
    /// user into a role with administrator access, that is an
    /// administrator's account, or that is an email template fails the
    /// whole write (403), whatever grants allowed it.
    pub guard_admin_power: bool,
    /// The audit entry, written in the same statement when a row changed.
    pub audit: AuditEvent,
}

/// A transaction of the Data API's store: a batch's operations, all
/// written or none. Dropped without [`commit`], it
/// rolls back.
///
/// [`commit`]: DataTransaction::commit
#[async_trait]
pub trait DataTransaction: Send {
    /// Runs a read in the transaction (it sees the transaction's writes).
    async fn read(
        &mut self,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Found, StoreError>;
    /// Runs writes in the transaction, as [`DataStore::write`] answers them.
    async fn write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError>;
    /// [`DataTransaction::write`], and when it fails, what it did is undone
    /// and the transaction goes on (a savepoint).
    async fn try_write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError>;
    /// Commits everything done in it.
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// CSV text in pieces, from a bounded channel: memory stays bounded
/// whatever the size of the answer. An error ends it.
pub type Chunks = tokio::sync::mpsc::Receiver<Result<Vec<u8>, StoreError>>;

/// A CSV import's transaction: the rows are staged as they are read (one
/// stream to the database), then inserted from there by
/// [`Change::InsertStaged`] writes, each sent while the next rows are
/// read. Dropped without [`commit`], it rolls back.
///
/// [`commit`]: ImportTransaction::commit
#[async_trait]
pub trait ImportTransaction: Send {
    /// Sends `rows` (each the header's fields, `None` for NULL) read at
    /// `lines` to the staged rows; waits only while the stream is full.
    async fn stage(
        &mut self,
        rows: &[Vec<Option<String>>],
        lines: &[u64],
    ) -> Result<(), StoreError>;
    /// Sends a write of staged rows, run once every row sent before it is
    /// staged; when it fails, what it did is undone and the transaction
    /// goes on (a savepoint). `whole`: it writes every row staged so far,
    /// which are then cleared once it went in. Its answer, the number of
    /// rows written, comes when awaited.
    async fn send_write(
        &mut self,
        table: &Table,
        write: (&Write<'_>, bool),
        context: &Context,
    ) -> Result<WriteAnswer, StoreError>;
    /// Commits everything written in it.
    async fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// The answer of a write sent by [`ImportTransaction::send_write`].
pub type WriteAnswer =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, StoreError>> + Send>>;

/// Persistence of the Data API.
#[async_trait]
pub trait DataStore: Send + Sync + 'static {
    /// The rows of `query` as CSV: the header record of the selected
    /// columns, then each row, every matching one when `all` (else
    /// `query.limit`). The statement first checks that `context.versions`
    /// are current; a failure before the first row fails the call.
    async fn export(
        &self,
        table: &Table,
        query: &ListQuery<'_>,
        all: bool,
        context: &Context,
    ) -> Result<Chunks, StoreError>;
    /// Opens a transaction.
    async fn begin(&self) -> Result<Box<dyn DataTransaction>, StoreError>;
    /// Opens a CSV import's transaction, its staged rows holding `columns`
    /// fields each.
    async fn begin_import(&self, columns: usize) -> Result<Box<dyn ImportTransaction>, StoreError>;
    /// A registered table with its grants (cached); `None` when there is none.
    async fn table(&self, schema: &str, name: &str) -> Result<Option<Arc<Table>>, StoreError>;
    /// Every registered table (for the per-role OpenAPI document).
    async fn tables(&self) -> Result<Vec<Arc<Table>>, StoreError>;
    /// The `data.import_max_bytes` setting.
    async fn import_max_bytes(&self) -> Result<u64, StoreError>;
    /// The settings a statement's context reads, as cached, with the
    /// settings version they were read at.
    async fn statement_settings(&self) -> Result<StatementSettings, StoreError>;
    /// Runs a read in one statement. The statement first checks that
    /// `context.versions` are current ([`StoreError::Stale`] if not).
    async fn read(
        &self,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Found, StoreError>;
    /// Runs the writes in one transaction; answers, per write, the JSON array
    /// of the rows written (`None` when it matched no row). Each statement
    /// first checks that `context.versions` are current
    /// ([`StoreError::Stale`], nothing written, if not).
    async fn write(
        &self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError>;
    /// A registered function with its description and invokers, as cached
    /// for the catalog version (`fresh`: read again now); `None` when none
    /// is registered under that name.
    async fn callable(
        &self,
        schema: &str,
        name: &str,
        fresh: bool,
    ) -> Result<Option<Arc<Callable>>, StoreError>;
    /// Runs a call in a transaction of its own (read-only when the function
    /// reads only) with `tessera.user_id` and `tessera.role_ids` set, once
    /// its statement found `call.versions` and `call.revision` current
    /// ([`StoreError::Stale`], nothing run, if not); answers the text of
    /// its JSON result.
    async fn call(&self, call: &FunctionCall<'_>) -> Result<String, StoreError>;
}
