//! Snapshots: the configuration exported as names, and a snapshot applied
//! as ordered steps in one transaction (or run and rolled back, for a diff).

mod export;
mod steps;

use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use sea_orm::{ConnectionTrait, TransactionTrait};
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;

use kernel::FieldError;
use snapshot::{Consent, Operation, Snapshot, SnapshotStore, StepReport};

use crate::{PgStore, map_err, stmt};

/// An apply's limits: a lock waited for at most 5 s, 5 minutes in all.
const LIMITS: &str = "SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '5min'";

/// The lower-case names of the roles with admin access, and the emails of
/// the active users in one (who hold administrator power).
const ADMIN_POWER_SQL: &str = "SELECT \
    coalesce((SELECT array_agg(lower(name)) FROM svc.roles WHERE admin_access), '{}') AS roles, \
    coalesce((SELECT array_agg(DISTINCT lower(u.email)) FROM svc.users u \
        JOIN svc.role_members m ON m.user_id = u.id JOIN svc.roles r ON r.id = m.role_id \
        WHERE r.admin_access AND u.active), '{}') AS users";

#[async_trait]
impl SnapshotStore for PgStore {
    async fn export(&self) -> Result<Snapshot, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        txn.execute_unprepared("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(map_err)?;
        let exported = export::export(&txn).await?;
        txn.rollback().await.map_err(map_err)?;
        Ok(exported)
    }

    async fn apply(
        &self,
        desired: &Snapshot,
        consent: Consent,
        execute: bool,
        event: AuditEvent,
    ) -> Result<Vec<StepReport>, StoreError> {
        let txn = self.db.begin().await.map_err(map_err)?;
        // One snapshot at a time: the plan holds until the commit.
        txn.execute_raw(stmt(
            "SELECT pg_advisory_xact_lock(hashtext('tessera.snapshot'))",
            [],
        ))
        .await
        .map_err(map_err)?;
        txn.execute_unprepared(LIMITS).await.map_err(map_err)?;
        let current = export::export(&txn).await?;
        let mut planned = snapshot::diff(&current, desired)?;
        let power = txn
            .query_one_raw(stmt(ADMIN_POWER_SQL, []))
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Internal("no administrators' row".into()))?;
        let roles: BTreeSet<String> = crate::rows::column::<Vec<String>>(&power, "roles")?
            .into_iter()
            .collect();
        let users: BTreeSet<String> = crate::rows::column::<Vec<String>>(&power, "users")?
            .into_iter()
            .collect();
        snapshot::mark_admin_power(&mut planned, &roles, &users);
        if !consent.admin_power
            && let Some((step, field)) = planned
                .iter()
                .find_map(|s| s.admin_power.as_ref().map(|f| (s, f)))
        {
            return Err(FieldError::new(
                field.clone(),
                format!(
                    "{} {} {} gives administrator power: apply with allowAdminPower to go on",
                    step.action.as_str(),
                    step.kind,
                    step.name
                ),
            )
            .into());
        }
        if !consent.destructive
            && let Some(first) = planned.iter().find(|s| s.destructive)
        {
            return Err(StoreError::Conflict {
                field: Some("allowDestructive"),
                message: format!(
                    "the snapshot would {} {} {} (destructive): apply with allowDestructive to go on",
                    first.action.as_str(),
                    first.kind,
                    first.name
                )
                .into(),
            });
        }
        let mut reports = Vec::with_capacity(planned.len());
        let mut memo = steps::Memo::default();
        let mut i = 0;
        while i < planned.len() {
            // Grants come one after another: checked each, inserted at once.
            let grants: Vec<(&snapshot::Grant, &str)> = planned[i..]
                .iter()
                .map_while(|s| match &s.operation {
                    Operation::CreateGrant(grant, path) => Some((grant, path.as_str())),
                    _ => None,
                })
                .collect();
            if grants.len() > 1 {
                steps::create_grants(&txn, &grants, &mut memo).await?;
                reports.extend(planned[i..i + grants.len()].iter().map(StepReport::of));
                i += grants.len();
                continue;
            }
            let step = &planned[i];
            i += 1;
            let sql = steps::run(self, &txn, &step.operation, &mut memo, !execute).await?;
            // A table or column step sets its own, shorter statement limit.
            if matches!(step.kind, "table" | "column") {
                txn.execute_unprepared(LIMITS).await.map_err(map_err)?;
            }
            reports.push(StepReport {
                sql,
                ..StepReport::of(step)
            });
        }
        if !execute {
            txn.rollback().await.map_err(map_err)?;
            // A diff changes nothing, and is audited all the same.
            let steps: Vec<Json> = reports.iter().map(StepReport::to_json).collect();
            crate::write_audit(
                &self.db,
                event.with_details(json!({ "steps": steps })),
                self.now(),
            )
            .await?;
            return Ok(reports);
        }
        // Rows inserted with their published definition move no version by
        // trigger: every instance must still see the new configuration on
        // its next request.
        txn.execute_unprepared(
            "UPDATE svc.cache_version SET catalog = catalog + 1; SELECT pg_notify('tessera_catalog', '')",
        )
        .await
        .map_err(map_err)?;
        let steps: Vec<Json> = reports.iter().map(StepReport::to_json).collect();
        let event = event.with_details(json!({ "steps": steps }));
        self.commit_catalog_change(txn, event).await?;
        Ok(reports)
    }
}
