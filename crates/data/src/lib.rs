//! The Data API: rows of exposed tables under the caller's grants, with the
//! filter language, `$USER` and `$PERIOD` variables, sorting and paging.

mod callers;
mod checks;
mod error;
mod query;
mod role_view;
mod service;
mod table;

pub use checks::{check_filter, masks, number, parse_filter, sort, user_column};
pub use error::{DataError, query_error, read_error};
pub use query::{
    Change, Context, DataStore, Found, ListQuery, Output, Predicate, Read, Shown, Write,
};
pub use role_view::RoleView;
pub use service::{
    Answer, Caller, DataRequest, DataService, LIMIT_DEFAULT, LIMIT_MAX, ListParams, Op, Page,
    RoleSubject, Watch, rows_seen_by,
};
pub use table::{Column, Kind, SERVICE_SCHEMA, SERVICE_TABLES, Table, service_columns};
