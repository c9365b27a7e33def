//! Snapshots: the configuration exported as names, and a snapshot applied
//! as ordered steps in one transaction (or run and rolled back, for a diff).

mod export;
mod steps;

use crate::db::Txn;
use async_trait::async_trait;
use audit::AuditEvent;
use kernel::StoreError;
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI32, Ordering};

use kernel::FieldError;
use snapshot::{Consent, Operation, Snapshot, SnapshotStore, StepReport};

use crate::query::{Begin, Query, Stored};
use crate::{PgStore, stmt};

/// An apply's limits: a lock waited for at most 5 s, a statement 5 minutes.
const LIMITS: &str = "SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '5min'";

/// A diff's limits: it runs no DDL on a table that exists and changes no
/// row that exists, so a statement stops after 30 s (and the whole diff
/// too: [`PgStore::with_diff_limit`]); the foreign keys of
/// the rows it writes are checked at a commit that never comes, so they
/// lock no row they name (migration 0025).
const DIFF_LIMITS: &str = "SET LOCAL lock_timeout = '5s'; SET LOCAL statement_timeout = '30s'; \
     SET CONSTRAINTS ALL DEFERRED";

/// The lower-case names of the roles with admin access, and the emails of
/// the active users in one (who hold administrator power).
/// Which of the role names (`$1`) and user emails (`$2`) a plan names are
/// an administrators' role and an active administrator, looked up as
/// applying them does.
const ADMIN_POWER_SQL: &str = "SELECT \
    coalesce((SELECT array_agg(c) FROM unnest($1::text[]) AS c WHERE EXISTS ( \
        SELECT 1 FROM svc.roles r WHERE lower(r.name) = lower(c) AND r.admin_access)), '{}') AS roles, \
    coalesce((SELECT array_agg(c) FROM unnest($2::text[]) AS c WHERE EXISTS ( \
        SELECT 1 FROM svc.users u JOIN svc.role_members m ON m.user_id = u.id \
        JOIN svc.roles r ON r.id = m.role_id \
        WHERE lower(u.email) = lower(c) AND u.active AND r.admin_access)), '{}') AS users";

#[async_trait]
impl SnapshotStore for PgStore {
    async fn export(&self) -> Result<Snapshot, StoreError> {
        let txn = self.db.open_txn().await?;
        txn.run_unprepared("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?;
        let exported = export::export(&txn).await?;
        txn.rollback().stored().await?;
        Ok(exported)
    }

    async fn apply(
        &self,
        desired: &Snapshot,
        consent: Consent,
        execute: bool,
        event: AuditEvent,
    ) -> Result<Vec<StepReport>, StoreError> {
        let backend = AtomicI32::new(0);
        let plan = self.run_plan(desired, consent, execute, &backend);
        let planned = if execute {
            plan.await
        } else {
            // A whole diff stops at its limit, so that no session waiting
            // on a name it inserted waits longer (API.md 21): its answer
            // comes at once, and its statement is cancelled on the server
            // while the plan still holds its connection (so the process id
            // names no other request's statement), then rolled back.
            let mut plan = std::pin::pin!(plan);
            tokio::select! {
                planned = &mut plan => match planned {
                    Err(StoreError::QueryTimeout) => Err(StoreError::DiffTooLarge),
                    planned => planned,
                },
                () = tokio::time::sleep(self.diff_limit) => {
                    self.cancel_backend(backend.load(Ordering::Acquire)).await;
                    Err(StoreError::DiffTooLarge)
                }
            }
        };
        if !execute {
            // A diff changes nothing, and is audited all the same, refused
            // or not.
            let planned = match planned {
                Ok((txn, reports, _)) => {
                    txn.rollback().stored().await?;
                    Ok(reports)
                }
                Err(error) => Err(error),
            };
            let details = match &planned {
                Ok(reports) => {
                    let steps: Vec<Json> = reports.iter().map(StepReport::to_json).collect();
                    json!({ "steps": steps })
                }
                Err(_) => json!({ "failed": true }),
            };
            crate::write_audit(&self.db, event.with_details(details), self.now()).await?;
            return planned;
        }
        let (txn, reports, current) = planned?;
        // Rows inserted with their published definition move no version by
        // trigger: every instance must still see the new configuration on
        // its next request.
        txn.run_unprepared(
            "UPDATE svc.cache_version SET catalog = catalog + 1; SELECT pg_notify('tessera_catalog', '')",
        ).await?;
        let steps: Vec<Json> = reports.iter().map(StepReport::to_json).collect();
        let mut details = json!({ "steps": steps });
        // Trusting a provider's unverified emails is named in the audit, as
        // a settings change names it.
        if let Some(oauth) = desired.settings.get("auth.oauth") {
            let stored = current.settings.get("auth.oauth").unwrap_or(&Json::Null);
            let trusted = kernel::settings::trust_email_changes(stored, oauth);
            if !trusted.is_empty() {
                details["trustEmail"] = Json::Object(trusted);
            }
        }
        self.commit_catalog_change(txn, event.with_details(details))
            .await?;
        Ok(reports)
    }
}

impl PgStore {
    /// Cancels the statement the server process `pid` runs, if any (a
    /// diff stopped at its limit; its transaction then rolls back).
    async fn cancel_backend(&self, pid: i32) {
        if pid == 0 {
            return;
        }
        if let Err(error) = self
            .db
            .run(stmt("SELECT pg_cancel_backend($1)", [pid.into()]))
            .await
        {
            tracing::warn!(%error, pid, "a stopped diff's statement could not be cancelled");
        }
    }

    /// Plans `desired` against this instance in a new transaction, checks
    /// the consent it needs, and runs its steps (`execute`) or plans each
    /// from the catalog alone; answers the transaction, the reports and
    /// the configuration it started from. A diff puts its server process's
    /// id in `backend` first.
    async fn run_plan(
        &self,
        desired: &Snapshot,
        consent: Consent,
        execute: bool,
        backend: &AtomicI32,
    ) -> Result<(Txn, Vec<StepReport>, Snapshot), StoreError> {
        let txn = self.db.open_txn().await?;
        if execute {
            // One apply at a time: the plan holds until the commit.
            txn.run(stmt(
                "SELECT pg_advisory_xact_lock(hashtext('tessera.snapshot'))",
                [],
            ))
            .await?;
        } else {
            // A diff, which changes nothing, waits for no apply and holds
            // none up; it reads the configuration as of one moment (an
            // apply committing meanwhile is not half seen).
            txn.run_unprepared("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await?;
        }
        let limits = if execute { LIMITS } else { DIFF_LIMITS };
        txn.run_unprepared(limits).await?;
        if !execute {
            // A diff moves no shared-state version (nor locks its row): it
            // marks its own transaction by id.
            let marked = txn
                .fetch_optional(stmt(
                    "SELECT set_config('tessera.dry_run', pg_current_xact_id()::text, true), \
                     pg_backend_pid() AS pid",
                    [],
                ))
                .await?
                .ok_or_else(|| StoreError::Internal("the diff's mark answered no row".into()))?;
            backend.store(
                crate::rows::column::<i32>(&marked, "pid")?,
                Ordering::Release,
            );
        }
        let current = export::export(&txn).await?;
        let mut planned = snapshot::diff(&current, desired)?;
        let (roles, users) = snapshot::admin_candidates(&planned, &current);
        let power = txn
            .fetch_optional(stmt(ADMIN_POWER_SQL, [roles.into(), users.into()]))
            .await?
            .ok_or_else(|| StoreError::Internal("no administrators' row".into()))?;
        let roles: BTreeSet<String> = crate::rows::column::<Vec<String>>(&power, "roles")?
            .into_iter()
            .collect();
        let users: BTreeSet<String> = crate::rows::column::<Vec<String>>(&power, "users")?
            .into_iter()
            .collect();
        snapshot::mark_admin_power(&mut planned, &current, &roles, &users);
        if !consent.admin_power
            && let Some((step, field)) = planned
                .iter()
                .find_map(|s| s.admin_power.as_ref().map(|p| (s, p)))
        {
            return Err(FieldError::new(
                field.field.clone(),
                format!(
                    "{} {} {} gives administrator power ({}): apply with allowAdminPower to go on",
                    step.action.as_str(),
                    step.kind,
                    step.name,
                    field.reason
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
                steps::create_grants(self, &txn, &grants, &mut memo).await?;
                reports.extend(planned[i..i + grants.len()].iter().map(StepReport::of));
                i += grants.len();
                continue;
            }
            let step = &planned[i];
            i += 1;
            let sql = steps::run(self, &txn, &step.operation, &mut memo, !execute).await?;
            // A table or column step sets its own, shorter statement limit.
            if matches!(step.kind, "table" | "column") {
                txn.run_unprepared(limits).await?;
            }
            reports.push(StepReport {
                sql,
                ..StepReport::of(step)
            });
        }
        Ok((txn, reports, current))
    }
}
