//! CSV in (API.md 13): `POST /api/data/{schema}/{table}` with
//! `Content-Type: text/csv`. The body is read in pieces as it arrives; its
//! rows are checked as JSON inserts are and inserted in chunks, all in one
//! transaction: every row, or none and the failing record's line.

use permissions::{Access, Action, Plane, Principal};
use serde_json::{Map, Value};
use std::sync::Arc;

use crate::callers::{Caller, DataRequest};
use crate::checks::{checked_columns, cover};
use crate::csv::{Reader, Record};
use crate::error::{DataError, Place, payload_error};
use crate::query::{Change, Context, DataTransaction, Shown, Write};
use crate::service::{DataService, Target};
use crate::table::{Column, Kind, Table};
use crate::writes::write_error;

/// Rows inserted by one statement, at most.
const CHUNK_ROWS: usize = 1000;
/// Bytes of field text gathered before a chunk is inserted, at most.
const CHUNK_BYTES: usize = 1 << 20;
/// Longest field, in bytes.
const FIELD_MAX: usize = 1 << 20;

/// An import under way: created by [`DataService::begin_import`], fed the
/// body's pieces, then finished. Dropped unfinished, nothing is inserted.
pub struct Import {
    service: DataService,
    table: Arc<Table>,
    principal: Principal,
    ip: Option<String>,
    /// The credential and zone, to resolve the caller again when the shared
    /// state moves during the import.
    bearer: String,
    zone_header: Option<String>,
    context: Context,
    /// Opened with the first chunk, so a body that never comes holds none.
    txn: Option<Box<dyn DataTransaction>>,
    reader: Reader,
    /// The header's names, and their columns by index into the table's,
    /// once read.
    header: Option<Vec<usize>>,
    names: Vec<String>,
    /// The rows waiting, and the line of each.
    pending: Vec<Vec<Option<String>>>,
    lines: Vec<u64>,
    pending_bytes: usize,
    bytes: u64,
    max_bytes: u64,
    inserted: u64,
}

impl DataService {
    /// Starts a CSV import into `schema.name`: the caller resolved afresh
    /// (so the body limit and grants are those of the moment) and refused
    /// before the body is read when it may not create rows there.
    pub async fn begin_import(
        &self,
        request: DataRequest<'_>,
        (schema, name): (&str, &str),
    ) -> Result<Import, DataError> {
        let (table, principal, context) = self.import_caller(request, (schema, name)).await?;
        let max_bytes = self.store.import_max_bytes().await?;
        Ok(Import {
            service: self.clone(),
            table,
            principal,
            ip: request.ip.map(str::to_owned),
            bearer: request.bearer.to_owned(),
            zone_header: request.zone_header.map(str::to_owned),
            context,
            txn: None,
            reader: Reader::new(FIELD_MAX),
            header: None,
            names: Vec::new(),
            pending: Vec::new(),
            lines: Vec::new(),
            pending_bytes: 0,
            bytes: 0,
            max_bytes,
            inserted: 0,
        })
    }

    /// The caller of `request` resolved afresh, the table and the
    /// statement's variables, refused unless it may create rows there.
    async fn import_caller(
        &self,
        request: DataRequest<'_>,
        (schema, name): (&str, &str),
    ) -> Result<(Arc<Table>, Principal, Context), DataError> {
        let target = Target::exposed(schema, name);
        self.as_current_caller(request, Plane::Api, async |caller: Caller<'_>, v| {
            let table = self.open(target, "POST").await?;
            Access::evaluate(caller.principal, &table.scopes, Action::Create)?;
            let context = self.context(caller, v, &table).await?;
            Ok((table, caller.principal.clone(), context))
        })
        .await
    }
}

impl Import {
    /// Reads the next piece of the body, inserting the chunks it completes.
    pub async fn feed(&mut self, piece: &[u8]) -> Result<(), DataError> {
        self.bytes += piece.len() as u64;
        if self.bytes > self.max_bytes {
            return Err(DataError::TooLarge(self.max_bytes));
        }
        let mut records = Vec::new();
        let parsed = self.reader.feed(piece, &mut records);
        self.take(records).await?;
        parsed.map_err(|e| payload_error("data", e.message).at(Place::Line(e.line)))
    }

    /// Ends the body: inserts what is left and commits; answers the number
    /// of rows inserted.
    pub async fn finish(mut self) -> Result<u64, DataError> {
        let mut records = Vec::new();
        let reader = std::mem::replace(&mut self.reader, Reader::new(FIELD_MAX));
        let parsed = reader.finish(&mut records);
        self.take(records).await?;
        parsed.map_err(|e| payload_error("data", e.message).at(Place::Line(e.line)))?;
        if self.header.is_none() {
            return Err(
                payload_error("data", "must start with a header row naming columns")
                    .at(Place::Line(1)),
            );
        }
        self.flush().await?;
        if let Some(txn) = self.txn.take() {
            txn.commit().await?;
        }
        Ok(self.inserted)
    }

    async fn take(&mut self, records: Vec<Record>) -> Result<(), DataError> {
        for record in records {
            let line = record.line;
            let Some(header) = &self.header else {
                self.names = record
                    .fields
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect();
                self.header = Some(self.header_of().map_err(|e| e.at(Place::Line(line)))?);
                continue;
            };
            // A blank line.
            if header.len() > 1 && record.fields.len() == 1 && record.fields[0].is_none() {
                continue;
            }
            let fields =
                checked_fields(&self.table, header, record).map_err(|e| e.at(Place::Line(line)))?;
            self.pending_bytes += fields.iter().flatten().map(String::len).sum::<usize>();
            self.pending.push(fields);
            self.lines.push(line);
            if self.lines.len() >= CHUNK_ROWS || self.pending_bytes >= CHUNK_BYTES {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// The header's columns: each a column of the table the caller may
    /// write, as a JSON insert checks them.
    fn header_of(&self) -> Result<Vec<usize>, DataError> {
        let mut checked = Map::new();
        for name in &self.names {
            if checked.insert(name.clone(), Value::Null).is_some() {
                return Err(payload_error(name.clone(), "is named twice in the header"));
            }
        }
        let access = Access::evaluate(&self.principal, &self.table.scopes, Action::Create)?;
        let columns = checked_columns(&self.table, &access, &checked, "")?;
        cover(&access, &columns, "")?;
        // In the header's order, which the records follow.
        Ok(self
            .names
            .iter()
            .filter_map(|name| self.table.columns.iter().position(|c| &c.name == name))
            .collect())
    }

    /// The caller, table and grants as they are now, the header checked
    /// against them again: after the shared state moved under the import.
    async fn refresh(&mut self) -> Result<(), DataError> {
        let request = DataRequest {
            bearer: &self.bearer,
            zone_header: self.zone_header.as_deref(),
            ip: self.ip.as_deref(),
        };
        let target = (self.table.schema.clone(), self.table.name.clone());
        let (table, principal, context) = self
            .service
            .import_caller(request, (&target.0, &target.1))
            .await?;
        (self.table, self.principal, self.context) = (table, principal, context);
        self.header = Some(self.header_of()?);
        Ok(())
    }

    /// Inserts the rows waiting; on a refusal, finds the first row refused
    /// and answers its error with its line.
    async fn flush(&mut self) -> Result<(), DataError> {
        if self.lines.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let lines = std::mem::take(&mut self.lines);
        self.pending_bytes = 0;
        if self.insert_current(&pending).await.is_ok() {
            self.inserted += lines.len() as u64;
            return Ok(());
        }
        for (row, line) in pending.chunks(1).zip(&lines) {
            self.insert_current(row)
                .await
                .map_err(|e| e.at(Place::Line(*line)))?;
        }
        // Refused together, accepted one by one: a conflict among them.
        Err(
            payload_error("data", "rows of this chunk conflict with each other")
                .at(Place::Line(lines[0])),
        )
    }

    /// Inserts `rows`; when the shared state moved under the import (the
    /// statement found its versions stale and was undone), the caller is
    /// resolved again and the rows inserted under the grants of now.
    async fn insert_current(&mut self, rows: &[Vec<Option<String>>]) -> Result<(), DataError> {
        for _ in 0..2 {
            let header = self.header.clone().unwrap_or_default();
            match self.insert(&header, rows).await {
                Err(error) if error.is_stale() => self.refresh().await?,
                done => return done,
            }
        }
        Err(DataError::Store(kernel::StoreError::Stale))
    }

    /// Inserts `rows` (each the `header`'s fields) in a savepoint.
    async fn insert(
        &mut self,
        header: &[usize],
        rows: &[Vec<Option<String>>],
    ) -> Result<(), DataError> {
        let table = &*self.table;
        let access = Access::evaluate(&self.principal, &table.scopes, Action::Create)?;
        let columns: Vec<&Column> = header.iter().map(|&i| &table.columns[i]).collect();
        let narrowed = cover(&access, &columns, "")?;
        let caller = Caller {
            principal: &self.principal,
            zone_header: None,
            ip: self.ip.as_deref(),
        };
        let write = Write {
            change: Change::InsertText { columns, rows },
            check: narrowed.row_filters(),
            returning: Shown::default(),
            guard_admin_power: !self.principal.admin,
            audit: self.service.audit(caller, table, "data.import"),
        };
        let txn = match &mut self.txn {
            Some(txn) => txn,
            None => self.txn.insert(self.service.store.begin().await?),
        };
        txn.try_write(table, &[write], &self.context)
            .await
            .map(|_| ())
            .map_err(|e| write_error(table, e))
    }
}

/// A record's fields in the `header`'s order, each checked as a JSON
/// insert checks its value (numbers, booleans, uuids and JSON must parse);
/// the database parses each as its column's type.
fn checked_fields(
    table: &Table,
    header: &[usize],
    record: Record,
) -> Result<Vec<Option<String>>, DataError> {
    if record.fields.len() != header.len() {
        return Err(payload_error(
            "data",
            format!(
                "has {} fields where the header names {}",
                record.fields.len(),
                header.len()
            ),
        ));
    }
    let mut fields = Vec::with_capacity(header.len());
    for (&index, field) in header.iter().zip(record.fields) {
        let column = &table.columns[index];
        let Some(text) = field else {
            fields.push(None);
            continue;
        };
        let bad = || {
            payload_error(
                column.name.clone(),
                format!("must be {}", column.kind.describe()),
            )
        };
        let text = match column.kind {
            // JSON `null` is NULL, as in a JSON insert.
            Kind::Json | Kind::Jsonb => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Null) => {
                    fields.push(None);
                    continue;
                }
                Ok(_) => text,
                Err(_) => return Err(payload_error(column.name.clone(), "must be JSON")),
            },
            Kind::Boolean => boolean(&text).ok_or_else(bad)?.to_string(),
            Kind::Integer | Kind::Number | Kind::Uuid => {
                let value = Value::String(text);
                if !column.kind.accepts(&value) {
                    return Err(bad());
                }
                match value {
                    Value::String(text) => text,
                    _ => return Err(bad()),
                }
            }
            _ => text,
        };
        fields.push(Some(text));
    }
    Ok(fields)
}

/// A boolean as PostgreSQL reads one.
fn boolean(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}
