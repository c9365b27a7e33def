//! Where a read goes: the primary's check (the shared state's versions and
//! the caller's write marks), and what a read tried on a replica comes to.

use std::sync::Arc;

use data::Context;
use kernel::{StoreError, Versions};
use sea_orm::sea_query::Values;

use super::Replica;
use crate::PgStore;

/// The primary's answer to [`PRIMARY_CHECK`]: the shared versions and the
/// caller's write marks.
#[derive(sea_orm::FromQueryResult)]
struct PrimaryCheckRow {
    auth: i64,
    catalog: i64,
    settings: i64,
    mark_lsn: Option<i64>,
    mark_xids: Option<String>,
}

/// The versions, then the user's recent writes: the largest WAL position
/// noted and every transaction, as `{1,2}`.
const PRIMARY_CHECK: &str = "SELECT v.auth, v.catalog, v.settings, \
     (SELECT (max(m.lsn) - '0/0'::pg_lsn)::bigint FROM svc.write_marks m WHERE m.user_id = $1) AS mark_lsn, \
     (SELECT array_agg(m.xid)::text FROM svc.write_marks m WHERE m.user_id = $1) AS mark_xids \
     FROM svc.cache_version v";

/// Where a read runs.
pub(crate) enum Target {
    Primary,
    /// A replica, with the transactions its snapshot must show (`{1,2}`).
    Replica(Arc<Replica>, Option<String>),
}

/// What a read tried on `replica` comes to: the answer to give (counted as
/// the replica's), or `None` when it runs again on the primary (see
/// [`Replica::fallback_for`]; counted as a fallback).
pub(crate) fn settle<T>(
    replica: &Replica,
    answer: Result<T, StoreError>,
) -> Option<Result<T, StoreError>> {
    match answer {
        Err(error) if let Some(reason) = replica.fallback_for(&error) => {
            fell_back(reason);
            None
        }
        done => {
            metrics::counter!("tessera_database_reads_total", "target" => replica.name.clone())
                .increment(1);
            Some(done)
        }
    }
}

impl PgStore {
    /// Counts a read the primary serves while replicas could.
    pub(crate) fn on_primary(&self) {
        if self.replicas.any() {
            metrics::counter!("tessera_database_reads_total", "target" => "primary").increment(1);
        }
    }
}

/// Counts a read that could have gone to a replica and went to the primary.
fn fell_back(reason: &'static str) {
    metrics::counter!("tessera_replica_fallbacks_total", "reason" => reason).increment(1);
}

impl PgStore {
    /// Where a read planned on `context` goes: a replica when one is
    /// current enough for the caller, else the primary. Reads the primary's
    /// versions and the user's write marks in one statement when a replica
    /// could serve; [`StoreError::Stale`] when the versions moved on.
    pub(crate) async fn read_target(&self, context: &Context) -> Result<Target, StoreError> {
        self.read_target_after(context, Vec::new()).await
    }

    /// [`PgStore::read_target`] for a read that must also see the
    /// transactions `xids` (realtime events' rows).
    pub(crate) async fn read_target_after(
        &self,
        context: &Context,
        mut xids: Vec<String>,
    ) -> Result<Target, StoreError> {
        let Some(max_lag_ms) = self.replica_lag_allowed().await? else {
            return Ok(Target::Primary);
        };
        let marks = self.primary_check(context).await?;
        xids.extend(marks.xids.iter().map(u64::to_string));
        let mut lsn = marks.lsn;
        if let Some(token) = data::consistency::sent() {
            lsn = lsn.max(token.lsn);
            xids.push(token.xid.to_string());
        }
        match self.replicas.pick(lsn, max_lag_ms) {
            Some(replica) => Ok(Target::Replica(replica, xid_list(&xids))),
            None => {
                fell_back("behind");
                Ok(Target::Primary)
            }
        }
    }

    /// A replica that may serve a read sent at once with the primary's
    /// check ([`PgStore::primary_check`], then [`settle_checked`]): one
    /// current enough for the consistency token the request sent back,
    /// with that token's transaction (`{1}`) for its statement to check;
    /// `None` when the primary serves.
    pub(crate) async fn replica_now(
        &self,
    ) -> Result<Option<(Arc<Replica>, Option<String>)>, StoreError> {
        let Some(max_lag_ms) = self.replica_lag_allowed().await? else {
            return Ok(None);
        };
        let token = data::consistency::sent();
        let lsn = token.map_or(0, |t| t.lsn);
        match self.replicas.pick(lsn, max_lag_ms) {
            Some(replica) => Ok(Some((replica, token.map(|t| format!("{{{}}}", t.xid))))),
            None => {
                fell_back("behind");
                Ok(None)
            }
        }
    }

    /// The lag a replica may have to serve, when any replica could serve
    /// at it now.
    async fn replica_lag_allowed(&self) -> Result<Option<u64>, StoreError> {
        if !self.replicas.any() {
            return Ok(None);
        }
        let max_lag_ms = self.versioned_settings().await?.0.data_replica_max_lag_ms();
        if !self.replicas.list.iter().any(|r| r.usable(max_lag_ms)) {
            fell_back("lag");
            return Ok(None);
        }
        Ok(Some(max_lag_ms))
    }

    /// The primary's check of a read planned on `context`:
    /// [`StoreError::Stale`] unless the shared state is still at the
    /// context's versions; else the caller's write marks.
    pub(crate) async fn primary_check(&self, context: &Context) -> Result<Marks, StoreError> {
        // On the reads' lane: a connection kept between requests, without
        // the pool's own round trip as it is given back.
        let rows = self
            .reads
            .rows(PRIMARY_CHECK, Values(vec![context.user_id.into()]))
            .await?;
        let row = rows
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        let check = crate::rows::row::<PrimaryCheckRow>(&sea_orm::QueryResult::from(row))?;
        let versions = Versions {
            auth: check.auth,
            catalog: check.catalog,
            settings: check.settings,
        };
        self.seen.observe(versions);
        if versions != context.versions {
            return Err(StoreError::Stale);
        }
        Ok(Marks {
            lsn: check
                .mark_lsn
                .and_then(|l| u64::try_from(l).ok())
                .unwrap_or(0),
            xids: check
                .mark_xids
                .as_deref()
                .unwrap_or_default()
                .trim_matches(['{', '}'])
                .split(',')
                .filter_map(|x| x.parse().ok())
                .collect(),
        })
    }
}

/// The caller's recent writes, as the primary's check read them.
pub(crate) struct Marks {
    /// The largest WAL position noted.
    lsn: u64,
    /// Each transaction.
    xids: Vec<u64>,
}

/// `xids` as an `xid8` array's text (`{1,2}`), `None` when empty.
fn xid_list(xids: &[String]) -> Option<String> {
    (!xids.is_empty()).then(|| format!("{{{}}}", xids.join(",")))
}

/// What a read sent to `replica` at once with the primary's check comes
/// to, given the check's `marks`: rows (with the replica snapshot's
/// `xmin`, when it answered one) are the answer only when every marked
/// transaction ended as of that snapshot; otherwise as [`settle`].
pub(crate) fn settle_checked<T>(
    replica: &Replica,
    answer: Result<(T, Option<i64>), StoreError>,
    marks: &Marks,
) -> Option<Result<T, StoreError>> {
    match answer {
        Ok((rows, xmin)) => {
            let xmin = xmin.and_then(|x| u64::try_from(x).ok());
            if marks
                .xids
                .iter()
                .all(|&x| xmin.is_some_and(|xmin| x < xmin))
            {
                settle(replica, Ok(rows))
            } else {
                fell_back("behind");
                None
            }
        }
        Err(error) => settle(replica, Err(error)),
    }
}
