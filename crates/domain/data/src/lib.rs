//! The Data API: rows of exposed tables under the caller's grants, with the
//! filter language, `$USER` and `$PERIOD` variables, sorting and paging.
//!
//! Where things are: `service` (the service and the table it opens),
//! `callers` (the request, the caller it resolves to, the retry on stale
//! state), `reads` (list, get, a role's preview), `writes` (insert, update,
//! delete), `select` (columns and embeds of related rows), `aggregate`
//! (groups and aggregates), `batch` (operations in one transaction), `import` (CSV in), `csv`,
//! `consistency` (read-your-writes over read replicas), `rpc` (calls of database functions), `watch` (realtime admission), `hooks` (write hooks, run through a port), `checks` (parameters and bodies
//! against real columns and grants), `query` (what the store is handed).

mod aggregate;
mod batch;
mod callers;
mod checks;
pub mod consistency;
pub mod csv;
mod error;
mod exports;
mod hooks;
mod import;
mod query;
mod reads;
mod role_view;
mod rpc;
mod select;
mod service;
mod table;
mod watch;
mod writes;

pub use batch::{Answered, OPERATIONS_MAX};
pub use callers::{Caller, DataRequest, Effect, until_current};
pub use checks::{check_filter, masks, number, parse_filter, sort, user_column};
pub use error::{DataError, Place, query_error, read_error};
pub use exports::{Export, PER_CALLER as EXPORTS_PER_CALLER};
pub use hooks::{Hook, HookCall, HookRefusal, WriteEvent, WriteHooks};
pub use import::Import;
pub use query::{
    Aggregate, AggregateQuery, Change, Chunks, Context, DataStore, DataTransaction, EMBED_ROWS_MAX,
    Embed, Found, Function, ImportTransaction, ListQuery, Output, Predicate, Read, Shown,
    StatementSettings, Upsert, Write, WriteAnswer,
};
pub use reads::{LIMIT_DEFAULT, LIMIT_MAX, ListParams, Page, RoleSubject, rows_seen_by};
pub use role_view::{RoleView, embeds_from};
pub use rpc::{Callable, FunctionCall};
pub use service::{DataService, Target};
pub use table::{Column, ForeignKey, Kind, SERVICE_SCHEMA, SERVICE_TABLES, Table, service_columns};
pub use watch::Watch;
