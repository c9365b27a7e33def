//! `/admin/api`: administrators only, with a session or an ADMIN token.

pub mod audit;
pub mod dashboards;
pub mod dataviews;
pub mod grants;
pub mod invitations;
pub mod openapi;
pub mod openapi_data;
mod openapi_rpc;
pub mod roles;
pub mod schema;
pub mod schema_changes;
pub mod settings;
pub mod snapshot;
pub mod sql;
pub mod tokens;
pub mod users;
pub mod workflows;

use kernel::Code;

use crate::error::ApiError;

/// Default and largest page size of admin lists.
const DEFAULT_LIMIT: u64 = kernel::page::LIMIT_DEFAULT as u64;
const MAX_LIMIT: u64 = kernel::page::LIMIT_MAX as u64;

/// Checks an `offset` query parameter: rows to skip, bound as a signed
/// 64-bit integer.
pub(crate) fn page_offset(offset: Option<u64>) -> Result<u64, ApiError> {
    match offset.unwrap_or(0) {
        n if i64::try_from(n).is_ok() => Ok(n),
        _ => Err(ApiError::field(
            Code::InvalidQuery,
            "offset",
            format!("must be from 0 to {}", i64::MAX),
        )),
    }
}

/// Checks a `limit` query parameter.
pub(crate) fn page_limit(limit: Option<u64>) -> Result<u64, ApiError> {
    match limit.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MAX_LIMIT => Ok(n),
        _ => Err(ApiError::field(
            Code::InvalidQuery,
            "limit",
            format!("must be from 1 to {MAX_LIMIT}"),
        )),
    }
}
