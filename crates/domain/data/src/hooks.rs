//! Write hooks (API.md 18): the published and enabled `beforeWrite`
//! workflows of a table, run once per row before it is written, as the
//! caller. The Data API only asks for them through [`WriteHooks`]; the
//! workflows side runs them, so this crate knows nothing of workflows.
//!
//! A table's hooks come with it from the catalog, whose version every
//! write checks in its own statement: a hook published, disabled or
//! deleted on another instance is seen by the next write here.

use std::sync::Arc;

use async_trait::async_trait;
use kernel::StoreError;
use serde_json::{Map, Value};
use uuid::Uuid;

use permissions::Access;

use crate::callers::Caller;
use crate::checks::{field_of, scoped};
use crate::error::{DataError, Place, payload_error};
use crate::query::{Context, Output, Predicate, Read};
use crate::service::{DataService, Via};
use crate::table::{Column, Table};

/// A row of an insert as sent, with its place in the payload (`[2]`).
pub(crate) type SentRow<'a> = (&'a Map<String, Value>, String);

/// A kind of write a hook runs before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteEvent {
    /// A row inserted.
    Insert,
    /// A row updated.
    Update,
    /// A row deleted.
    Delete,
}

impl WriteEvent {
    /// The name used in triggers and in `start.data.event`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteEvent::Insert => "insert",
            WriteEvent::Update => "update",
            WriteEvent::Delete => "delete",
        }
    }

    /// The event a trigger's name stands for.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "insert" => Some(WriteEvent::Insert),
            "update" => Some(WriteEvent::Update),
            "delete" => Some(WriteEvent::Delete),
            _ => None,
        }
    }
}

/// A published, enabled `beforeWrite` workflow of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// The workflow.
    pub workflow_id: Uuid,
    /// Its slug: hooks run in slug order.
    pub slug: String,
    /// The writes it runs before.
    pub events: Vec<WriteEvent>,
    /// Its published `{ trigger, steps }`, as stored.
    pub definition: Arc<Value>,
}

/// The hooks of one row's write, to run in order.
#[derive(Debug)]
pub struct HookCall<'a> {
    /// The hooks, in slug order.
    pub hooks: Vec<&'a Hook>,
    /// The caller, whom the hooks' runs act as.
    pub user_id: Uuid,
    /// The write.
    pub event: WriteEvent,
    /// `schema.table`.
    pub resource: String,
    /// The row as stored (null on insert).
    pub old: Value,
    /// The row as sent (null on delete).
    pub new: Value,
}

/// Why the hooks refused a row.
#[derive(Debug)]
pub enum HookRefusal {
    /// A hook's run failed: its error's code and message.
    Failed {
        /// The run's error code (a `fail` step's, `SCRIPT_ERROR`, ...).
        code: String,
        /// Its message.
        message: String,
    },
    /// A hook ran past `workflows.hook_timeout_ms`.
    TimedOut,
    /// The hooks could not be run (the store failed).
    Store(StoreError),
}

/// Runs a table's hooks (implemented by the workflows side).
#[async_trait]
pub trait WriteHooks: Send + Sync + 'static {
    /// Runs `call.hooks` in order, each seeing the previous one's `new`;
    /// answers `new` as the last one left it.
    async fn run(&self, call: HookCall<'_>) -> Result<Value, HookRefusal>;
}

impl Table {
    /// The hooks that run before writes of `event`, in slug order.
    pub fn hooks_of(&self, event: WriteEvent) -> Vec<&Hook> {
        self.hooks
            .iter()
            .filter(|h| h.events.contains(&event))
            .collect()
    }
}

impl DataService {
    /// Has the Data API run write hooks through `hooks` (set once, when
    /// the services are built; the workflows that run them need this
    /// service for their own steps).
    pub fn set_hooks(&self, hooks: Arc<dyn WriteHooks>) {
        let _ = self.hooks.set(hooks);
    }

    /// `new` after `hooks` ran on it, as `caller`; `at` names the row of
    /// a request of several (`[2]`) in the refusal's place.
    pub(crate) async fn hooked(
        &self,
        caller: Caller<'_>,
        table: &Table,
        (event, hooks): (WriteEvent, Vec<&Hook>),
        old: Value,
        new: Value,
    ) -> Result<Value, DataError> {
        let runner = self.hooks.get().ok_or_else(|| {
            DataError::Store(StoreError::Internal("write hooks are not wired".into()))
        })?;
        let call = HookCall {
            hooks,
            user_id: caller.principal.user_id,
            event,
            resource: format!("{}.{}", table.schema, table.name),
            old,
            new,
        };
        runner.run(call).await.map_err(|refusal| match refusal {
            HookRefusal::Failed { code, message } => DataError::Hook { code, message },
            HookRefusal::TimedOut => DataError::HookTimeout,
            HookRefusal::Store(e) => DataError::Store(e),
        })
    }

    /// The rows of an insert or upsert as its hooks leave them, in the
    /// order of `rows`, each with whether it ran the update hooks; none
    /// when the table has no hook for them. An upserted row whose unique
    /// key `update` finds taken (by a row its update grants reach) runs the
    /// update hooks with that row as `old`, any other the insert hooks (and
    /// is then written as a plain insert: a key taken meanwhile is 409, not
    /// an update no update hook saw). A hook may not change the key an
    /// upsert conflicts on. A refusal of a row of several names it
    /// (`meta.index`).
    pub(crate) async fn hooked_inserts(
        &self,
        caller: Caller<'_>,
        via: Via<'_>,
        table: &Table,
        (rows, single): (&[SentRow<'_>], bool),
        update: &Option<(Access<'_>, Vec<&Column>)>,
        context: &Context,
    ) -> Result<Vec<(Map<String, Value>, bool)>, DataError> {
        let inserts = table.hooks_of(WriteEvent::Insert);
        let updates = match update {
            Some(_) => table.hooks_of(WriteEvent::Update),
            None => Vec::new(),
        };
        if inserts.is_empty() && updates.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(rows.len());
        for (i, (row, _)) in rows.iter().enumerate() {
            let place = |error: DataError| match single {
                true => error,
                false => error.at(Place::Index(i)),
            };
            let old = match update {
                Some((access, conflict)) => {
                    let taken = taken_key(conflict, row);
                    match taken {
                        Some(texts) => {
                            let key = Predicate::Key(
                                conflict
                                    .iter()
                                    .copied()
                                    .zip(texts.iter().map(String::as_str))
                                    .collect(),
                            );
                            let predicate = scoped(None, access, Some(key));
                            self.stored_row(via, table, predicate, context)
                                .await
                                .map_err(place)?
                        }
                        None => None,
                    }
                }
                None => None,
            };
            let (event, hooks) = match old {
                Some(_) => (WriteEvent::Update, updates.clone()),
                None => (WriteEvent::Insert, inserts.clone()),
            };
            let new = Value::Object((*row).clone());
            let new = match hooks.is_empty() {
                true => new,
                false => self
                    .hooked(
                        caller,
                        table,
                        (event, hooks),
                        old.unwrap_or(Value::Null),
                        new,
                    )
                    .await
                    .map_err(place)?,
            };
            let hooked = hooked_row(new).map_err(place)?;
            if let Some((_, conflict)) = update
                && event == WriteEvent::Update
                && let Some(moved) = conflict
                    .iter()
                    .find(|c| hooked.get(&c.name) != row.get(&c.name))
            {
                return Err(place(payload_error(
                    moved.name.clone(),
                    "was changed by a hook; an upsert's hooks may not change the key it conflicts on",
                )));
            }
            out.push((hooked, event == WriteEvent::Update));
        }
        Ok(out)
    }

    /// The row `predicate` matches, every column as stored: a hook's `old`.
    pub(crate) async fn stored_row(
        &self,
        via: Via<'_>,
        table: &Table,
        predicate: Predicate<'_>,
        context: &Context,
    ) -> Result<Option<Value>, DataError> {
        let read = Read::One {
            select: table
                .columns
                .iter()
                .map(|column| Output { column, mask: None })
                .collect(),
            embeds: Vec::new(),
            predicate,
        };
        let found = self.read_via(via, table, &read, context).await?;
        found
            .json
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|_| DataError::Store(StoreError::Internal("a row's JSON".into())))
            })
            .transpose()
    }
}

/// The columns of a row a hook returned: those the caller sent (`sent`,
/// checked against its grants already) and those the hook set, each
/// known, writable and of its column's kind; in the row's order.
pub(crate) fn hooked_columns<'t>(
    table: &'t Table,
    sent: &[&'t Column],
    row: &Map<String, Value>,
    (path, admin): (&str, bool),
) -> Result<Vec<&'t Column>, DataError> {
    row.iter()
        .map(|(name, value)| {
            let field = || field_of(path, name);
            let column = match sent.iter().find(|c| &c.name == name) {
                Some(column) => *column,
                None => {
                    let column = table.column(name).ok_or_else(|| {
                        payload_error(
                            field(),
                            "was set by a hook but is not a column of the table",
                        )
                    })?;
                    if !column.writable || (table.admin_only(name) && !admin) {
                        return Err(payload_error(
                            field(),
                            "was set by a hook but cannot be written",
                        ));
                    }
                    column
                }
            };
            // A hook's value of a column sent is checked as its own are.
            if !column.kind.accepts(value) {
                return Err(payload_error(
                    field(),
                    format!("was set by a hook and must be {}", column.kind.describe()),
                ));
            }
            Ok(column)
        })
        .collect()
}

/// The values of the unique key `conflict` in `row`, as text; `None` when
/// one is missing or null (such a row takes no existing row's place).
fn taken_key(conflict: &[&Column], row: &Map<String, Value>) -> Option<Vec<String>> {
    conflict
        .iter()
        .map(|column| match row.get(&column.name)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        })
        .collect()
}

/// A hook's `new` as a row: its object, or a refusal when a hook left
/// something else.
pub(crate) fn hooked_row(new: Value) -> Result<Map<String, Value>, DataError> {
    match new {
        Value::Object(row) => Ok(row),
        _ => Err(DataError::Hook {
            code: "HOOK_INVALID".into(),
            message: "A hook left the row as something other than an object".into(),
        }),
    }
}
