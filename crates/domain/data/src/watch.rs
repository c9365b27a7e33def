//! Realtime subscriptions' admission: what a subscriber to a table reads,
//! refused as the list route refuses.

use std::sync::Arc;

use kernel::filter::Filter;
use permissions::{Access, Action, Principal};

use crate::callers::Caller;
use crate::checks::parse_filter;
use crate::error::DataError;
use crate::service::{DataService, Target};
use crate::table::Table;

impl DataService {
    /// What a realtime subscription of `caller` to `schema.name` reads,
    /// refused as the list route refuses (403, 404, 405, and 400 for a
    /// `filter` naming a column the caller may not read). `caller` must be
    /// resolved afresh for this request: nothing here reads the database,
    /// so a remembered caller would admit a revoked credential.
    pub async fn watch(
        &self,
        caller: Caller<'_>,
        schema: &str,
        name: &str,
        filter: Option<&str>,
    ) -> Result<Watch, DataError> {
        let target = Target::exposed(schema, name);
        let table = self.open(target, "GET").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Read)?;
        let filter = filter
            .map(|raw| parse_filter(&table, &access, raw))
            .transpose()?;
        Ok(Watch {
            principal: caller.principal.clone(),
            table: table.clone(),
            filter,
        })
    }
}

/// A realtime subscriber's view of one table ([`DataService::watch`]).
#[derive(Debug, Clone)]
pub struct Watch {
    /// The caller, as resolved when subscribing.
    pub principal: Principal,
    /// The table.
    pub table: Arc<Table>,
    /// The caller's own filter, checked against the table.
    pub filter: Option<Filter>,
}
