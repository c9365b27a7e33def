//! The Data API: rows of exposed tables under the caller's grants, with the
//! filter language, `$USER` and `$PERIOD` variables, sorting and paging.

mod query;
mod service;
mod table;

pub use query::{Change, Context, DataStore, ListQuery, Output, Predicate, Read, Write};
pub use service::{Caller, DataError, DataService, ListParams, ReadRequest, RoleView, user_column};
pub use table::{Column, Kind, SERVICE_SCHEMA, SERVICE_TABLES, Table, service_columns};
