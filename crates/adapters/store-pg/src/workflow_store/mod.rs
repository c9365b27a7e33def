//! Workflows and their runs in PostgreSQL, one file per part of the
//! store: definitions, runs, the run journal, and the worker's claims
//! (leased runs claimed with `FOR UPDATE SKIP LOCKED`, row events consumed
//! exactly once).

use std::time::Duration;

use kernel::StoreError;
use sea_orm::{ConnectionTrait, Value};
use serde_json::Value as Json;
use uuid::Uuid;
use workflows::store::ClaimedRun;

mod definitions;
mod journal;
mod rows;
mod runs;
mod worker;

use self::rows::claimed;
use crate::query::Query;
use crate::rows as typed;
use crate::{PgStore, stmt};

const WORKFLOW_COLUMNS: &str =
    "id, slug, name, enabled, draft, published, published_at, created_at, updated_at";

/// Columns a claimed run is resumed from (a run a trigger started has
/// no stored chain: its own workflow).
const CLAIMED_COLUMNS: &str =
    "id, definition, input, run_as, steps, attempts, coalesce(chain, ARRAY[workflow_id]) AS chain";

fn json_of<T: serde::Serialize>(value: &T) -> Result<Json, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Internal(e.to_string()))
}

fn seconds(lease: Duration) -> Value {
    lease.as_secs_f64().into()
}

fn uuids(ids: &[Uuid]) -> Value {
    ids.to_vec().into()
}

impl PgStore {
    /// Runs a claiming statement (`$1` owner, `$2` lease seconds, `$3` limit)
    /// that answers [`CLAIMED_COLUMNS`].
    async fn claim(
        &self,
        sql: &str,
        owner: Uuid,
        lease: Duration,
        limit: u64,
    ) -> Result<Vec<ClaimedRun>, StoreError> {
        let values = [
            owner.into(),
            seconds(lease),
            i64::try_from(limit).unwrap_or(1).into(),
        ];
        let rows = self.db.fetch_all(stmt(sql, values)).await?;
        rows.iter().map(claimed).collect()
    }

    /// Captures row changes of a resource's table (idempotent; plain SQL
    /// writes are captured too).
    pub(crate) async fn capture_events(
        conn: &impl ConnectionTrait,
        resource: Uuid,
    ) -> Result<(), StoreError> {
        let row = conn
            .fetch_optional(stmt(
                "SELECT format('CREATE OR REPLACE TRIGGER tessera_row_events AFTER INSERT OR UPDATE OR DELETE ON %I.%I \
                 FOR EACH ROW EXECUTE FUNCTION svc.capture_row_event()', schema_name, table_name) AS ddl \
                 FROM svc.resources WHERE id = $1",
                [resource.into()],
            )).await?
            .ok_or_else(|| kernel::FieldError::new("trigger.resourceId", "no such resource"))?;
        let ddl: String = typed::column(&row, "ddl")?;
        conn.run_unprepared(&ddl).await?;
        Ok(())
    }
}
