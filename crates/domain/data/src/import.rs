//! CSV in (API.md 13): `POST /api/data/{schema}/{table}` with
//! `Content-Type: text/csv`. The body is read in pieces as it arrives; its
//! rows are checked as JSON inserts are and inserted in chunks, all in one
//! transaction: every row, or none and the failing record's line.

use permissions::{Access, Action, Plane, Principal};
use serde_json::{Map, Value, json};
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
    /// The table, caller and header each chunk is inserted under.
    chunk: Chunk,
    /// The credential and zone, to resolve the caller again when the shared
    /// state moves during the import.
    bearer: String,
    zone_header: Option<String>,
    /// Opened with the first chunk, so a body that never comes holds none;
    /// held by the chunk in flight while it is.
    txn: Option<Box<dyn DataTransaction>>,
    /// Whether the transaction was opened.
    begun: bool,
    /// The chunk being inserted while the next one is read.
    in_flight: Option<tokio::task::JoinHandle<Sent>>,
    /// Set by the first error: the import can no longer be finished.
    failed: bool,
    reader: Reader,
    /// The header's names, once read (its columns are the chunk's).
    names: Option<Vec<String>>,
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
            chunk: Chunk {
                service: self.clone(),
                table,
                principal,
                ip: request.ip.map(str::to_owned),
                context,
                header: Vec::new(),
            },
            bearer: request.bearer.to_owned(),
            zone_header: request.zone_header.map(str::to_owned),
            txn: None,
            begun: false,
            in_flight: None,
            failed: false,
            reader: Reader::new(FIELD_MAX),
            names: None,
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
        let read = self.read(piece).await;
        self.settled(read).await
    }

    async fn read(&mut self, piece: &[u8]) -> Result<(), DataError> {
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
        if self.failed {
            return Err(payload_error("data", "the import failed before its end"));
        }
        let ended = self.end().await;
        self.settled(ended).await?;
        self.flush().await?;
        self.settle().await?;
        if let Some(txn) = self.txn.take() {
            txn.commit().await?;
        }
        Ok(self.inserted)
    }

    /// Reads the end of the body.
    async fn end(&mut self) -> Result<(), DataError> {
        let mut records = Vec::new();
        let reader = std::mem::replace(&mut self.reader, Reader::new(FIELD_MAX));
        let parsed = reader.finish(&mut records);
        self.take(records).await?;
        parsed.map_err(|e| payload_error("data", e.message).at(Place::Line(e.line)))?;
        if self.names.is_none() {
            return Err(
                payload_error("data", "must start with a header row naming columns")
                    .at(Place::Line(1)),
            );
        }
        Ok(())
    }

    async fn take(&mut self, records: Vec<Record>) -> Result<(), DataError> {
        for record in records {
            let line = record.line;
            if self.names.is_none() {
                let names = record.fields.into_iter().map(Option::unwrap_or_default);
                self.names = Some(names.collect());
                self.chunk.header = self.header_of().map_err(|e| e.at(Place::Line(line)))?;
                continue;
            }
            let (table, header) = (&self.chunk.table, &self.chunk.header);
            // A blank line.
            if header.len() > 1 && record.fields.len() == 1 && record.fields[0].is_none() {
                continue;
            }
            let fields =
                checked_fields(table, header, record).map_err(|e| e.at(Place::Line(line)))?;
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
        let (table, names) = (&self.chunk.table, self.names.as_deref().unwrap_or_default());
        let mut checked = Map::new();
        for name in names {
            if checked.insert(name.clone(), Value::Null).is_some() {
                return Err(payload_error(name.clone(), "is named twice in the header"));
            }
        }
        let access = Access::evaluate(&self.chunk.principal, &table.scopes, Action::Create)?;
        let columns = checked_columns(table, &access, &checked, "")?;
        cover(&access, &columns, "")?;
        // In the header's order, which the records follow.
        Ok(names
            .iter()
            .filter_map(|name| table.columns.iter().position(|c| &c.name == name))
            .collect())
    }

    /// The caller, table and grants as they are now, the header checked
    /// against them again: after the shared state moved under the import.
    async fn refresh(&mut self) -> Result<(), DataError> {
        let request = DataRequest {
            bearer: &self.bearer,
            zone_header: self.zone_header.as_deref(),
            ip: self.chunk.ip.as_deref(),
        };
        let table = &self.chunk.table;
        let (table, principal, context) = self
            .chunk
            .service
            .import_caller(request, (&table.schema, &table.name))
            .await?;
        let chunk = &mut self.chunk;
        (chunk.table, chunk.principal, chunk.context) = (table, principal, context);
        self.chunk.header = self.header_of()?;
        Ok(())
    }

    /// Sends the rows waiting to the database, to be inserted while the
    /// next ones are read, after the chunk sent before them is settled.
    async fn flush(&mut self) -> Result<(), DataError> {
        self.settle().await?;
        if self.lines.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.pending);
        let lines = std::mem::take(&mut self.lines);
        self.pending_bytes = 0;
        let mut txn = self.transaction().await?;
        let chunk = self.chunk.clone();
        self.in_flight = Some(tokio::spawn(async move {
            let result = chunk.insert(txn.as_mut(), &rows, &lines).await;
            Sent {
                txn,
                rows,
                lines,
                result,
            }
        }));
        Ok(())
    }

    /// The import's transaction, taken to send a chunk in: opened with the
    /// first chunk; none later means a chunk was lost, and the import fails.
    async fn transaction(&mut self) -> Result<Box<dyn DataTransaction>, DataError> {
        match self.txn.take() {
            Some(txn) => Ok(txn),
            None if self.begun => Err(DataError::Store(kernel::StoreError::Internal(
                "an import lost its transaction".into(),
            ))),
            None => {
                self.begun = true;
                Ok(self.chunk.service.store.begin().await?)
            }
        }
    }

    /// Waits for the chunk in flight (left in place until it ends, so a
    /// cancelled wait loses nothing). Refused on stale shared state, it is
    /// inserted again under the caller of now; refused otherwise, row by
    /// row, to answer the first row refused with its line.
    async fn settle(&mut self) -> Result<(), DataError> {
        let Some(task) = self.in_flight.as_mut() else {
            return Ok(());
        };
        let ended = task.await;
        self.in_flight = None;
        let sent = ended.map_err(|_| {
            DataError::Store(kernel::StoreError::Internal(
                "an import's insert stopped".into(),
            ))
        })?;
        self.txn = Some(sent.txn);
        let (rows, lines) = (sent.rows, sent.lines);
        let inserted = match sent.result {
            Ok(()) => Ok(()),
            Err(error) if error.is_stale() => {
                self.refresh().await?;
                self.insert_current(&rows, &lines).await
            }
            Err(error) => Err(error),
        };
        if inserted.is_ok() {
            self.inserted += lines.len() as u64;
            return Ok(());
        }
        for (row, line) in rows.chunks(1).zip(lines.chunks(1)) {
            self.insert_current(row, line)
                .await
                .map_err(|e| e.at(Place::Line(line[0])))?;
        }
        // Refused together, accepted one by one: a conflict among them.
        Err(
            payload_error("data", "rows of this chunk conflict with each other")
                .at(Place::Line(lines[0])),
        )
    }

    /// `result`, unless a row read before its error is refused: then that
    /// row's error (the chunk in flight and the rows waiting are inserted
    /// first). After an error the import is over.
    async fn settled(&mut self, result: Result<(), DataError>) -> Result<(), DataError> {
        let Err(error) = result else {
            return Ok(());
        };
        self.failed = true;
        let earlier = match self.flush().await {
            Ok(()) => self.settle().await,
            refused => refused,
        };
        match (earlier, line_of(&error)) {
            (Err(earlier), Some(line)) if line_of(&earlier).is_some_and(|at| at > line) => {
                Err(error)
            }
            (Err(earlier), _) => Err(earlier),
            (Ok(()), _) => Err(error),
        }
    }

    /// Inserts `rows` (of `lines`) in the open transaction; when the shared
    /// state moved under the import (the statement found its versions stale
    /// and was undone), the caller is resolved again and the rows inserted
    /// under the grants of now.
    async fn insert_current(
        &mut self,
        rows: &[Vec<Option<String>>],
        lines: &[u64],
    ) -> Result<(), DataError> {
        for _ in 0..2 {
            let chunk = self.chunk.clone();
            let mut txn = self.transaction().await?;
            let inserted = chunk.insert(txn.as_mut(), rows, lines).await;
            self.txn = Some(txn);
            match inserted {
                Err(error) if error.is_stale() => self.refresh().await?,
                done => return done,
            }
        }
        Err(DataError::Store(kernel::StoreError::Stale))
    }
}

impl Drop for Import {
    /// An import dropped unfinished (the client went away, the body
    /// stalled) stops its chunk in flight; the transaction rolls back.
    fn drop(&mut self) {
        if let Some(task) = self.in_flight.take() {
            task.abort();
        }
    }
}

/// A chunk sent to the database: the transaction it ran in, its rows and
/// lines, and whether it was inserted.
struct Sent {
    txn: Box<dyn DataTransaction>,
    rows: Vec<Vec<Option<String>>>,
    lines: Vec<u64>,
    result: Result<(), DataError>,
}

/// The import's table, caller and header, owned, so that a chunk is
/// inserted while the next one is read.
#[derive(Clone)]
struct Chunk {
    service: DataService,
    table: Arc<Table>,
    principal: Principal,
    ip: Option<String>,
    context: Context,
    header: Vec<usize>,
}

impl Chunk {
    /// Inserts `rows` (each the header's fields) in a savepoint of `txn`,
    /// audited as `data.import` with their count and first and last line.
    async fn insert(
        &self,
        txn: &mut dyn DataTransaction,
        rows: &[Vec<Option<String>>],
        lines: &[u64],
    ) -> Result<(), DataError> {
        let table = &*self.table;
        let access = Access::evaluate(&self.principal, &table.scopes, Action::Create)?;
        let columns: Vec<&Column> = self.header.iter().map(|&i| &table.columns[i]).collect();
        let narrowed = cover(&access, &columns, "")?;
        let caller = Caller {
            principal: &self.principal,
            zone_header: None,
            ip: self.ip.as_deref(),
        };
        let mut audit = self.service.audit(caller, table, "data.import");
        if let (Some(first), Some(last), Value::Object(details)) =
            (lines.first(), lines.last(), &mut audit.details)
        {
            details.insert("lines".into(), json!([first, last]));
        }
        let write = Write {
            change: Change::InsertText { columns, rows },
            check: narrowed.row_filters(),
            returning: Shown::default(),
            guard_admin_power: !self.principal.admin,
            audit,
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

/// The CSV line an error names, if any.
fn line_of(error: &DataError) -> Option<u64> {
    match error {
        DataError::At {
            place: Place::Line(line),
            ..
        } => Some(*line),
        _ => None,
    }
}

/// A boolean as PostgreSQL reads one.
fn boolean(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}
