//! Rows read as typed values: a statement's columns go by name into a
//! `#[derive(FromQueryResult)]` struct ([`row`]), or one column is read by
//! its name ([`column`]); no column is mapped by hand.

use kernel::{StoreError, Versions};
use sea_orm::{FromQueryResult, QueryResult, TryGetable};

use crate::map_err;

/// `row` as the typed row `T`, whose fields name the statement's columns;
/// `Option<T>` is `None` when a column `T` needs is null (the empty side of
/// an outer join).
pub(crate) fn row<T: FromQueryResult>(row: &QueryResult) -> Result<T, StoreError> {
    T::from_query_result(row, "").map_err(map_err)
}

/// The column `name` of `row`.
pub(crate) fn column<T: TryGetable>(row: &QueryResult, name: &str) -> Result<T, StoreError> {
    row.try_get("", name).map_err(map_err)
}

/// The shared state's versions as a statement reads them from
/// `svc.cache_version`, in columns `{prefix}auth`, `{prefix}catalog` and
/// `{prefix}settings`.
#[derive(FromQueryResult)]
struct VersionsRow {
    auth: i64,
    catalog: i64,
    settings: i64,
}

/// The versions in the columns of `row` named with `prefix`.
pub(crate) fn versions_of(row: &QueryResult, prefix: &str) -> Result<Versions, StoreError> {
    let VersionsRow {
        auth,
        catalog,
        settings,
    } = VersionsRow::from_query_result(row, prefix).map_err(map_err)?;
    Ok(Versions {
        auth,
        catalog,
        settings,
    })
}
