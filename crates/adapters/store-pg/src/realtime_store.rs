//! The realtime change log (`svc.realtime_events`, written by a trigger on
//! each watched table) and the instance's one LISTEN on it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use data::{Context, ListQuery, Table};
use kernel::StoreError;
use realtime::{Change, EventRef, Poll, RealtimeStore};
use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{FromQueryResult, QueryResult};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::data_store::{On, changes_sql};
use crate::query::Query;
use crate::replicas::{Target, settle};
use crate::{PgStore, rows, stmt, versions_of};

/// The channel the trigger announces logged changes on.
const CHANNEL: &str = "tessera_realtime";

/// Events after `$1` and below the frontier, of resources `$2`, at most
/// `$3`, with the versions and the frontier in the same statement (one row
/// with null event columns when there is none).
const POLL: &str = "SELECT v.auth, v.catalog, v.settings, f.frontier, e.id, e.resource_id, e.event \
     FROM svc.cache_version v \
     CROSS JOIN (SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 24) AS frontier) f \
     LEFT JOIN LATERAL (SELECT id, resource_id, event FROM svc.realtime_events \
         WHERE id > $1 AND id < f.frontier AND resource_id = ANY($2) ORDER BY id LIMIT $3) e ON true \
     ORDER BY e.id";

/// An event of [`POLL`]; all null when the poll found none.
#[derive(FromQueryResult)]
struct EventRow {
    id: i64,
    resource_id: Uuid,
    event: String,
}

/// A change as a subscriber sees it.
#[derive(FromQueryResult)]
struct ChangeRow {
    event: i64,
    new: bool,
    body: String,
}

fn event_of(row: &QueryResult) -> Result<Option<EventRef>, StoreError> {
    Ok(rows::row::<Option<EventRow>>(row)?.map(|e| EventRef {
        id: e.id,
        resource_id: e.resource_id,
        kind: e.event,
    }))
}

fn limit(n: u64) -> sea_orm::Value {
    i64::try_from(n).unwrap_or(i64::MAX).into()
}

#[async_trait]
impl RealtimeStore for PgStore {
    async fn keep(&self, resources: &[Uuid], seconds: u64) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "SELECT svc.realtime_keep($1, $2)",
                [resources.to_vec().into(), limit(seconds)],
            ))
            .await?;
        Ok(())
    }

    async fn prune(&self, seconds: u64) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "WITH gone AS (DELETE FROM svc.realtime_interest WHERE until < now()) \
                 DELETE FROM svc.realtime_events WHERE at < now() - make_interval(secs => $1)",
                [limit(seconds)],
            ))
            .await?;
        Ok(())
    }

    async fn take_stream(&self, id: Uuid, user: Uuid, limit_to: u64) -> Result<bool, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT svc.take_stream($1, $2, $3) AS taken",
                [id.into(), user.into(), limit(limit_to)],
            ))
            .await?
            .ok_or_else(|| StoreError::Internal("take_stream answered no row".into()))?;
        rows::column(&row, "taken")
    }

    async fn renew_streams(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "UPDATE svc.realtime_streams SET seen_at = now() WHERE id = ANY($1)",
                [ids.to_vec().into()],
            ))
            .await?;
        Ok(())
    }

    async fn release_streams(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        self.db
            .run(stmt(
                "DELETE FROM svc.realtime_streams WHERE id = ANY($1)",
                [ids.to_vec().into()],
            ))
            .await?;
        Ok(())
    }

    async fn poll(
        &self,
        after: i64,
        resources: &[Uuid],
        limit_to: u64,
    ) -> Result<Poll, StoreError> {
        let rows = self
            .db
            .fetch_all(stmt(
                POLL,
                [after.into(), resources.to_vec().into(), limit(limit_to)],
            ))
            .await?;
        let first = rows
            .first()
            .ok_or_else(|| StoreError::Internal("svc.cache_version has no row".into()))?;
        let versions = versions_of(first, "")?;
        self.seen.observe(versions);
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            events.extend(event_of(row)?);
        }
        Ok(Poll {
            versions,
            frontier: rows::column(first, "frontier")?,
            events,
        })
    }

    async fn between(
        &self,
        after: i64,
        until: i64,
        resources: &[Uuid],
        limit_to: u64,
    ) -> Result<Vec<EventRef>, StoreError> {
        let rows = self
            .db
            .fetch_all(stmt(
                "SELECT id, resource_id, event FROM svc.realtime_events \
                 WHERE id > $1 AND id <= $2 AND resource_id = ANY($3) ORDER BY id LIMIT $4",
                [
                    after.into(),
                    until.into(),
                    resources.to_vec().into(),
                    limit(limit_to),
                ],
            ))
            .await?;
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            events.extend(event_of(row)?);
        }
        Ok(events)
    }

    async fn replayable(&self, id: i64, seconds: u64) -> Result<bool, StoreError> {
        let row = self
            .db
            .fetch_optional(stmt(
                "SELECT EXISTS (SELECT 1 FROM svc.realtime_events \
                 WHERE id = $1 AND at > now() - make_interval(secs => $2)) AS found",
                [id.into(), limit(seconds)],
            ))
            .await?;
        match row {
            Some(row) => rows::column(&row, "found"),
            None => Ok(false),
        }
    }

    async fn changes(
        &self,
        table: &Table,
        query: &ListQuery<'_>,
        context: &Context,
        events: &[i64],
    ) -> Result<Vec<Change>, StoreError> {
        // Each event's transaction (its id's high bits) must be visible
        // where the rows are read.
        let xids = events.iter().map(|id| (id >> 24).to_string()).collect();
        let tried = match self.read_target_after(context, xids).await? {
            Target::Replica(replica, xids) => {
                let on = On::Replica(xids.as_deref());
                let statement = changes_sql(table, query, context, events, on);
                settle(&replica, changed_rows(replica.db(), statement).await)
            }
            Target::Primary => None,
        };
        let rows = match tried {
            Some(answer) => answer?,
            None => {
                self.on_primary();
                let statement = changes_sql(table, query, context, events, On::Primary);
                changed_rows(&self.db, statement).await?
            }
        };
        rows.iter()
            .map(|row| {
                let change = rows::row::<ChangeRow>(row)?;
                Ok(Change {
                    event: change.event,
                    new: change.new,
                    row: crate::json_rows::compact(change.body),
                })
            })
            .collect()
    }

    fn wake(&self) -> Arc<Notify> {
        self.realtime_wake
            .get_or_init(|| {
                let wake = Arc::new(Notify::new());
                // Behind a transaction-mode pooler a session keeps no
                // LISTEN: the hub finds changes at its tick.
                if self.db.pooler().is_none() {
                    tokio::spawn(listen(self.db.orm().clone(), wake.clone()));
                }
                wake
            })
            .clone()
    }
}

/// LISTENs on [`CHANNEL`] until the process ends, reconnecting as needed;
/// each notification wakes the hub (a missed one costs at most its tick).
async fn listen(db: sea_orm::DatabaseConnection, wake: Arc<Notify>) {
    loop {
        if let Ok(mut listener) = PgListener::connect_with(db.get_postgres_connection_pool()).await
            && listener.listen(CHANNEL).await.is_ok()
        {
            while let Ok(Some(_)) = listener.try_recv().await {
                wake.notify_one();
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs the statement of realtime changes on `db`.
async fn changed_rows(
    db: &crate::db::Db,
    (sql, values): (String, sea_orm::sea_query::Values),
) -> Result<Vec<sea_orm::QueryResult>, StoreError> {
    db.fetch_all(sea_orm::Statement::from_sql_and_values(
        sea_orm::DbBackend::Postgres,
        sql,
        values,
    ))
    .await
}
