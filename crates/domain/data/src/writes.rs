//! Writes: inserts (one row or many), updates and deletes by key, each one
//! guarded statement with its audit entry, answering what the caller's read
//! grants show of the rows written.

use audit::AuditEvent;
use kernel::StoreError;
use permissions::{Access, Action, Denied, Plane, Principal};
use serde_json::{Map, Value, json};

use crate::callers::{Caller, DataRequest, Effect};
use crate::checks::{checked_columns, cover, key_of, readable_columns, scoped};
use crate::error::{DataError, payload_error, query_error};
use crate::hooks::{WriteEvent, hooked_columns, hooked_row};
use crate::query::{Change, Context, Output, Shown, Upsert, Write};
use crate::service::{DataService, Target, Via};
use crate::table::{Column, Table};

impl DataService {
    /// `POST /api/data/{schema}/{table}`: one row (an object) or several (an
    /// array), in one transaction; the rows written as JSON text.
    pub async fn create(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            self.create_as(caller, v, target, body).await
        })
        .await
    }

    /// `POST /api/data/{schema}/{table}?onConflict=a,b`: inserts each row or,
    /// when its values of the unique key `on_conflict` are taken, updates
    /// that row with the other columns given; the rows written as JSON text.
    pub async fn upsert(
        &self,
        request: DataRequest<'_>,
        (schema, name): (&str, &str),
        body: &Value,
        on_conflict: &str,
    ) -> Result<String, DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            self.insert_as(caller, v, target, body, Some(on_conflict))
                .await
        })
        .await
    }

    /// `PATCH /api/data/{schema}/{table}/{pk}`: the row changed, as JSON text.
    pub async fn update(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            self.update_as(caller, v, target, key, body).await
        })
        .await
    }

    /// `DELETE /api/data/{schema}/{table}/{pk}`.
    pub async fn delete(
        &self,
        request: DataRequest<'_>,
        schema: &str,
        name: &str,
        key: &str,
    ) -> Result<(), DataError> {
        let target = Target::exposed(schema, name);
        self.as_caller(request, Plane::Api, Effect::Writes, async |caller, v| {
            self.delete_as(caller, v, target, key).await
        })
        .await
    }

    /// Inserts as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing written) when that is no longer current.
    pub async fn create_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        body: &Value,
    ) -> Result<String, DataError> {
        self.insert_as(caller, auth_version, target, body, None)
            .await
    }

    /// Inserts, or upserts on the unique key `on_conflict` (which needs the
    /// update grants too), as a caller resolved at auth version `auth_version`.
    pub async fn insert_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        body: &Value,
        on_conflict: Option<&str>,
    ) -> Result<String, DataError> {
        self.insert_via(caller, auth_version, target, (body, on_conflict), Via::Pool)
            .await
    }

    /// [`DataService::insert_as`] with its statements run where `via` says.
    pub(crate) async fn insert_via(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        (body, on_conflict): (&Value, Option<&str>),
        via: Via<'_>,
    ) -> Result<String, DataError> {
        let table = self.open(target, "POST").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Create)?;
        let update = on_conflict
            .map(|raw| {
                let update = Access::evaluate(caller.principal, &table.scopes, Action::Update)?;
                Ok::<_, DataError>((update, conflict_key(&table, raw)?))
            })
            .transpose()?;
        let (rows, single) = match body {
            Value::Object(row) => (vec![(row, String::new())], true),
            Value::Array(items) if items.is_empty() => {
                return Err(payload_error("data", "must hold at least one row"));
            }
            Value::Array(items) => (
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        item.as_object()
                            .map(|row| (row, format!("[{i}]")))
                            .ok_or_else(|| payload_error(format!("[{i}]"), "must be an object"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                false,
            ),
            _ => {
                return Err(payload_error(
                    "data",
                    "must be an object or an array of objects",
                ));
            }
        };
        // The grants cover each row as sent, before any hook sees it.
        let mut checked = Vec::with_capacity(rows.len());
        for (sent, path) in &rows {
            if update.is_some() && sent.is_empty() {
                return Err(payload_error(
                    if path.is_empty() {
                        "data"
                    } else {
                        path.as_str()
                    }
                    .to_owned(),
                    "an upserted row names its columns",
                ));
            }
            let sent_columns = checked_columns(&table, &access, sent, path)?;
            let upsert = match &update {
                Some((update, conflict)) => Some(upsert_of(update, conflict, &sent_columns, path)?),
                None => None,
            };
            let narrowed = cover(&access, &sent_columns, path)?;
            checked.push((sent_columns, upsert, narrowed));
        }
        let context = self.context(caller, auth_version, &table).await?;
        let hooked = self
            .hooked_inserts(caller, via, &table, (&rows, single), &update, &context)
            .await?;
        let returning = self.returning(caller.principal, &table);
        let mut writes: Vec<Write<'_>> = Vec::new();
        // Rows merge into one statement when they name the same columns,
        // (hooked) were sent naming the same ones and upsert alike, so one
        // check fits all.
        let mut run_keys: Option<(Vec<&String>, Vec<&String>, bool)> = None;
        for (i, ((sent, path), (sent_columns, mut upsert, narrowed))) in
            rows.iter().zip(checked).enumerate()
        {
            // A hook's columns are written too; the row filters hold on the
            // row as written (the statement's check).
            let (row, columns) = match hooked.get(i) {
                Some((row, updated)) => {
                    let admin = caller.principal.admin;
                    let columns = hooked_columns(&table, &sent_columns, row, (path, admin))?;
                    // A row that ran the insert hooks goes in as an insert.
                    if !updated {
                        upsert = None;
                    }
                    if let Some(upsert) = &mut upsert {
                        upsert.updates_only = true;
                        let added = columns.iter().filter(|c| {
                            !sent_columns.iter().any(|s| s.name == c.name)
                                && !upsert.conflict.iter().any(|k| k.name == c.name)
                        });
                        upsert.set.extend(added);
                    }
                    (row, columns)
                }
                None => (*sent, sent_columns),
            };
            let keys = (
                row.keys().collect::<Vec<_>>(),
                match hooked.is_empty() {
                    true => Vec::new(),
                    false => sent.keys().collect(),
                },
                upsert.is_some(),
            );
            if run_keys.as_ref() == Some(&keys)
                && let Some(Write {
                    change: Change::Insert { rows, .. },
                    ..
                }) = writes.last_mut()
            {
                rows.push(row);
                continue;
            }
            writes.push(Write {
                change: Change::Insert {
                    columns,
                    rows: vec![row],
                    upsert,
                },
                check: narrowed.row_filters(),
                returning: returning.clone(),
                guard_admin_power: !caller.principal.admin,
                audit: self.audit(
                    caller,
                    &table,
                    if update.is_some() {
                        "data.upsert"
                    } else {
                        "data.create"
                    },
                ),
            });
            run_keys = Some(keys);
        }
        let written = self.write(via, &table, &writes, &context).await?;
        let mut rows = written.iter().flatten().map(|array| items(array));
        Ok(if single {
            rows.next().unwrap_or_default().to_owned()
        } else {
            format!("[{}]", rows.collect::<Vec<_>>().join(","))
        })
    }

    /// Changes a row as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing written) when that is no longer current.
    pub async fn update_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
        body: &Value,
    ) -> Result<String, DataError> {
        self.update_via(caller, auth_version, target, (key, body), Via::Pool)
            .await
    }

    /// [`DataService::update_as`] with its statement run where `via` says.
    pub(crate) async fn update_via(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        (key, body): (&str, &Value),
        via: Via<'_>,
    ) -> Result<String, DataError> {
        let table = self.open(target, "PATCH").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Update)?;
        let key = key_of(&table, key)?;
        let values: &Map<String, Value> = body
            .as_object()
            .ok_or_else(|| payload_error("data", "must be an object of columns"))?;
        if values.is_empty() {
            return Err(payload_error("data", "must set at least one column"));
        }
        let sent_columns = checked_columns(&table, &access, values, "")?;
        let narrowed = cover(&access, &sent_columns, "")?;
        let predicate = scoped(None, &narrowed, Some(key));
        let context = self.context(caller, auth_version, &table).await?;
        // The hooks see the row as stored (one the caller may change) and
        // the values as sent; what they set is written too.
        let hooks = table.hooks_of(WriteEvent::Update);
        let hooked = match hooks.is_empty() {
            true => None,
            false => {
                let old = self
                    .stored_row(via, &table, predicate.clone(), &context)
                    .await?
                    .ok_or(DataError::NotFound)?;
                let new = Value::Object(values.clone());
                let new = self
                    .hooked(caller, &table, (WriteEvent::Update, hooks), old, new)
                    .await?;
                Some(hooked_row(new)?)
            }
        };
        let (values, columns) = match &hooked {
            Some(row) => {
                let columns =
                    hooked_columns(&table, &sent_columns, row, ("", caller.principal.admin))?;
                (row, columns)
            }
            None => (values, sent_columns),
        };
        let write = Write {
            change: Change::Update {
                columns,
                values,
                predicate,
            },
            check: narrowed.row_filters(),
            returning: self.returning(caller.principal, &table),
            guard_admin_power: !caller.principal.admin,
            audit: self.audit(caller, &table, "data.update"),
        };
        let written = self.write(via, &table, &[write], &context).await?;
        let row = written
            .into_iter()
            .flatten()
            .next()
            .ok_or(DataError::NotFound)?;
        Ok(items(&row).to_owned())
    }

    /// Deletes a row as a caller resolved at auth version `auth_version`;
    /// [`StoreError::Stale`] (nothing deleted) when that is no longer current.
    pub async fn delete_as(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
    ) -> Result<(), DataError> {
        self.delete_via(caller, auth_version, target, key, Via::Pool)
            .await
    }

    /// [`DataService::delete_as`] with its statement run where `via` says.
    pub(crate) async fn delete_via(
        &self,
        caller: Caller<'_>,
        auth_version: i64,
        target: Target<'_>,
        key: &str,
        via: Via<'_>,
    ) -> Result<(), DataError> {
        let table = self.open(target, "DELETE").await?;
        let access = Access::evaluate(caller.principal, &table.scopes, Action::Delete)?;
        let predicate = scoped(None, &access, Some(key_of(&table, key)?));
        let context = self.context(caller, auth_version, &table).await?;
        let hooks = table.hooks_of(WriteEvent::Delete);
        if !hooks.is_empty() {
            let old = self
                .stored_row(via, &table, predicate.clone(), &context)
                .await?
                .ok_or(DataError::NotFound)?;
            self.hooked(
                caller,
                &table,
                (WriteEvent::Delete, hooks),
                old,
                Value::Null,
            )
            .await?;
        }
        let write = Write {
            change: Change::Delete { predicate },
            check: None,
            returning: Shown::default(),
            guard_admin_power: !caller.principal.admin,
            audit: self.audit(caller, &table, "data.delete"),
        };
        match self
            .write(via, &table, &[write], &context)
            .await?
            .pop()
            .flatten()
        {
            Some(_) => Ok(()),
            None => Err(DataError::NotFound),
        }
    }

    async fn write(
        &self,
        via: Via<'_>,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, DataError> {
        match via {
            Via::Pool => self.store.write(table, writes, context).await,
            Via::Transaction(txn) => txn.lock().await.write(table, writes, context).await,
            Via::Savepoints(txn) => txn.lock().await.try_write(table, writes, context).await,
        }
        .map_err(|e| write_error(table, e))
    }

    /// How a write answers: the rows as the caller's read grants show them,
    /// the key columns alone where they show nothing.
    pub(crate) fn returning<'t>(&self, caller: &Principal, table: &'t Table) -> Shown<'t> {
        let keys: Vec<Output<'t>> = table
            .key_columns()
            .map(|column| Output { column, mask: None })
            .collect();
        match Access::evaluate(caller, &table.scopes, Action::Read) {
            Ok(read) => Shown {
                columns: readable_columns(table, &read),
                reach: read.row_filters(),
                keys,
            },
            Err(_) => Shown {
                columns: keys.clone(),
                reach: None,
                keys,
            },
        }
    }

    pub(crate) fn audit(
        &self,
        caller: Caller<'_>,
        table: &Table,
        action: &'static str,
    ) -> AuditEvent {
        AuditEvent::new(
            caller.principal.actor(),
            action,
            Some(format!("resource:{}", table.resource_id)),
            caller.ip.map(str::to_owned),
        )
        .with_details(json!({ "schema": table.schema, "table": table.name }))
    }
}

/// A store failure of a write on `table`: a failed check with its message,
/// a row outside the grants as a refusal.
pub(crate) fn write_error(table: &Table, error: StoreError) -> DataError {
    match error {
        StoreError::CheckViolation { constraint } => DataError::Check(
            table
                .check_messages
                .get(&constraint)
                .cloned()
                .unwrap_or_else(|| format!("A value breaks the rule {constraint}")),
        ),
        StoreError::RowDenied => DataError::Denied(Denied::NoGrant),
        other => DataError::Store(other),
    }
}

/// The columns of `onConflict`: exactly a unique key of the table.
fn conflict_key<'t>(table: &'t Table, raw: &str) -> Result<Vec<&'t Column>, DataError> {
    let mut columns: Vec<&'t Column> = Vec::new();
    for name in raw.split(',').map(str::trim) {
        let column = table.column(name).ok_or_else(|| {
            query_error("onConflict", format!("{name} is not a column of the table"))
        })?;
        if !columns.iter().any(|c| c.name == name) {
            columns.push(column);
        }
    }
    if table.is_unique_key(&columns) {
        Ok(columns)
    } else {
        Err(query_error(
            "onConflict",
            "must name the columns of the primary key or of a unique index",
        ))
    }
}

/// How a row giving `columns` updates an existing row under the update
/// grants `update`: every column it sets (all given but the key's) covered
/// by one of them.
fn upsert_of<'t>(
    update: &Access<'t>,
    conflict: &[&'t Column],
    columns: &[&'t Column],
    path: &str,
) -> Result<Upsert<'t>, DataError> {
    let set: Vec<&'t Column> = columns
        .iter()
        .copied()
        .filter(|c| !conflict.iter().any(|k| k.name == c.name))
        .collect();
    if let Some(column) = set.iter().find(|c| !update.covers(&c.name)) {
        let field = if path.is_empty() {
            column.name.clone()
        } else {
            format!("{path}.{}", column.name)
        };
        return Err(payload_error(
            field,
            "is not writable under your update grants",
        ));
    }
    let narrowed = cover(update, &set, path)?;
    Ok(Upsert {
        conflict: conflict.to_vec(),
        set,
        check: narrowed.row_filters(),
        updates_only: false,
    })
}

/// The items of a JSON array's text (`[a,b]` gives `a,b`).
fn items(array: &str) -> &str {
    let text = array.trim();
    text.strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::items;

    #[test]
    fn items_are_the_array_without_its_brackets() {
        assert_eq!(items("[{\"a\":1},{\"a\":2}]"), "{\"a\":1},{\"a\":2}");
        assert_eq!(items(" [] "), "");
        assert_eq!(items("{\"a\":1}"), "{\"a\":1}");
    }
}
