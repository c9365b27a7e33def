//! Configuration snapshots (API.md section 12): the tables, exposure, roles,
//! grants, workflows, DataViews, dashboards and settings of an instance as
//! one document that names things, never ids; the ordered steps that make
//! another instance match it; and their application in one transaction.

mod check;
mod diff;
mod model;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use audit::{Actor, AuditEvent};
use kernel::{Code, ErrorCode, FieldError, StoreError};
use serde_json::{Value, json};

pub use check::{ViewSource, at};
pub use diff::{
    Action, AdminPower, CREDENTIAL_SETTINGS, Operation, Step, admin_candidates, diff,
    mark_admin_power,
};
pub use model::{
    Column, Dashboard, DataView, ForeignKey, Function, Grant, Index, Resource, Role, Snapshot,
    Table, VERSION, Workflow,
};

/// A step as it ran (or would run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// create, alter or drop.
    pub action: &'static str,
    /// What kind of thing it changes.
    pub kind: &'static str,
    /// What it changes, by name.
    pub name: String,
    /// The SQL it ran, for schema steps.
    pub sql: Option<String>,
    /// Whether it is destructive.
    pub destructive: bool,
    /// A setting's value before and after (secrets `[REDACTED]`).
    pub values: Option<(Value, Value)>,
    /// Why it gives administrator power, when it does.
    pub admin_power: Option<String>,
}

impl StepReport {
    /// What `step` reports, without its SQL.
    pub fn of(step: &Step) -> Self {
        Self {
            action: step.action.as_str(),
            kind: step.kind,
            name: step.name.clone(),
            sql: None,
            destructive: step.destructive,
            values: step.values.clone(),
            admin_power: step.admin_power.as_ref().map(|p| p.reason.clone()),
        }
    }

    /// `{ action, kind, name, sql?, old?, new?, adminPower?, adminPowerReason? }`.
    pub fn to_json(&self) -> Value {
        let mut step = json!({ "action": self.action, "kind": self.kind, "name": self.name });
        if let Some(sql) = &self.sql {
            step["sql"] = Value::String(sql.clone());
        }
        if let Some((old, new)) = &self.values {
            step["old"] = old.clone();
            step["new"] = new.clone();
        }
        if let Some(reason) = &self.admin_power {
            step["adminPower"] = Value::Bool(true);
            step["adminPowerReason"] = Value::String(reason.clone());
        }
        step
    }
}

/// What an apply may do beyond ordinary changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Consent {
    /// Steps that drop or retype (409 without it).
    pub destructive: bool,
    /// Steps that give administrator power (400 without it).
    pub admin_power: bool,
}

/// Reading and applying snapshots.
#[async_trait]
pub trait SnapshotStore: Send + Sync + 'static {
    /// The configuration as it is.
    async fn export(&self) -> Result<Snapshot, StoreError>;
    /// In one transaction: reads the configuration, plans the steps to
    /// `desired`, refuses those `consent` does not allow, runs them; with
    /// `execute` commits with `event` (its details get the steps). Without
    /// it (a diff) nothing locks a table that exists, everything rolls
    /// back, and `event` is audited on its own. Answers the steps with the
    /// SQL each ran (or would run).
    async fn apply(
        &self,
        desired: &Snapshot,
        consent: Consent,
        execute: bool,
        event: AuditEvent,
    ) -> Result<Vec<StepReport>, StoreError>;
}

/// Failures of snapshot handling.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The snapshot is malformed or names what does not exist.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ErrorCode for SnapshotError {
    fn code(&self) -> Code {
        match self {
            SnapshotError::Invalid(e) => e.code(),
            SnapshotError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            SnapshotError::Invalid(e) => e.message(),
            SnapshotError::Store(e) => e.message(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            SnapshotError::Invalid(e) => e.field(),
            SnapshotError::Store(e) => e.field(),
        }
    }
}

/// What a diff answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The steps, in order.
    pub steps: Vec<StepReport>,
    /// Whether one of them is destructive.
    pub destructive: bool,
}

/// Export, diff and apply.
#[derive(Clone)]
pub struct SnapshotService {
    store: Arc<dyn SnapshotStore>,
}

impl SnapshotService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn SnapshotStore>) -> Self {
        Self { store }
    }

    /// The configuration as a snapshot document.
    pub async fn export(&self) -> Result<Value, SnapshotError> {
        Ok(self.store.export().await?.to_json())
    }

    /// The steps that would make this instance match `snapshot`, planned
    /// and checked in a transaction that rolls back and locks no table
    /// (audited as `snapshot.diff`).
    pub async fn diff(
        &self,
        actor: Actor,
        snapshot: &Value,
        ip: Option<String>,
    ) -> Result<Planned, SnapshotError> {
        let desired = Snapshot::parse(snapshot)?;
        let event = AuditEvent::new(actor, "snapshot.diff", None, ip);
        let consent = Consent {
            destructive: true,
            admin_power: true,
        };
        let steps = self.store.apply(&desired, consent, false, event).await?;
        let destructive = steps.iter().any(|s| s.destructive);
        Ok(Planned { steps, destructive })
    }

    /// Makes this instance match `snapshot` in one transaction.
    pub async fn apply(
        &self,
        actor: Actor,
        snapshot: &Value,
        consent: Consent,
        ip: Option<String>,
    ) -> Result<Vec<StepReport>, SnapshotError> {
        let desired = Snapshot::parse(snapshot)?;
        let event = AuditEvent::new(actor, "snapshot.apply", None, ip);
        Ok(self.store.apply(&desired, consent, true, event).await?)
    }
}
