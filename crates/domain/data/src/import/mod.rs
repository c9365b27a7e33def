//! CSV in (API.md 13): `POST /api/data/{schema}/{table}` with
//! `Content-Type: text/csv`. The body is read in pieces as it arrives; its
//! rows are checked as JSON inserts are and staged as they are read (one
//! stream to the database for the whole import), then inserted from there
//! in chunks, all in one transaction: every row, or none and the failing
//! record's line.

use permissions::{Access, Action, Plane, Principal};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::sync::Mutex;

use crate::callers::{Caller, DataRequest};
use crate::checks::{checked_columns, cover};
use crate::csv::{Reader, Record};
use crate::error::{DataError, Place, payload_error};
use crate::hooks::WriteEvent;
use crate::query::{
    Change, Context, DataTransaction, ImportTransaction, Shown, Write, WriteAnswer,
};
use crate::service::{DataService, Target};
use crate::table::{Column, Kind, Table};
use crate::writes::write_error;

mod hooked;

/// Rows staged at a time, at most.
const STAGE_ROWS: usize = 1000;
/// Bytes of field text gathered before they are staged, at most.
const STAGE_BYTES: usize = 1 << 20;
/// Rows one statement inserts from the staged rows, at most.
const CHUNK_ROWS: u64 = 100_000;
/// Bytes of field text one statement inserts, at most.
const CHUNK_BYTES: u64 = 64 << 20;
/// Longest field, in bytes.
const FIELD_MAX: usize = 1 << 20;
/// Columns an import's header names, at most.
const COLUMNS_MAX: usize = 1599;

/// An import under way: created by [`DataService::begin_import`], fed the
/// body's pieces, then finished. Dropped unfinished, nothing is inserted.
pub struct Import {
    /// The table, caller and header the rows are inserted under.
    chunk: Chunk,
    /// The credential and zone, to resolve the caller again when the shared
    /// state moves during the import.
    bearer: String,
    zone_header: Option<String>,
    /// Opened with the first rows staged, so a body that never comes holds
    /// none.
    txn: Option<Box<dyn ImportTransaction>>,
    /// A table with insert hooks: each row goes in as a JSON insert would
    /// (its hooks run on it), not through staging, in this transaction
    /// (opened with the first rows).
    hooked: Option<Option<Mutex<Box<dyn DataTransaction>>>>,
    /// Set by the first error: the import can no longer be finished.
    failed: bool,
    reader: Reader,
    /// The header's names, once read (its columns are the staged rows').
    names: Option<Vec<String>>,
    /// The rows waiting to be staged, and the line of each.
    pending: Vec<Vec<Option<String>>>,
    lines: Vec<u64>,
    pending_bytes: usize,
    /// What was staged and not yet sent to be inserted.
    unsent: Option<Lines>,
    /// The insert sent and not yet answered (one at a time), and its lines.
    in_flight: Option<(Lines, WriteAnswer)>,
    bytes: u64,
    max_bytes: u64,
    inserted: u64,
}

/// Staged rows: lines `first..=last`, `rows` of them holding `bytes` of
/// field text.
#[derive(Debug, Clone, Copy)]
struct Lines {
    first: u64,
    last: u64,
    rows: u64,
    bytes: u64,
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
        let hooked = (!table.hooks_of(WriteEvent::Insert).is_empty()).then_some(None);
        Ok(Import {
            hooked,
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
            failed: false,
            reader: Reader::new(FIELD_MAX),
            names: None,
            pending: Vec::new(),
            lines: Vec::new(),
            pending_bytes: 0,
            unsent: None,
            in_flight: None,
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
    /// Reads the next piece of the body, staging the rows it completes.
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

    /// Ends the body: stages what is left, inserts every staged row and
    /// commits; answers the number of rows inserted.
    pub async fn finish(mut self) -> Result<u64, DataError> {
        if self.failed {
            return Err(payload_error("data", "the import failed before its end"));
        }
        let ended = self.end().await;
        self.settled(ended).await?;
        self.stage().await?;
        self.send_unsent().await?;
        self.settle().await?;
        if let Some(txn) = self.txn.take() {
            txn.commit().await?;
        }
        if let Some(Some(txn)) = self.hooked.take() {
            txn.into_inner().commit().await?;
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
            if self.lines.len() >= STAGE_ROWS || self.pending_bytes >= STAGE_BYTES {
                self.stage().await?;
            }
        }
        Ok(())
    }

    /// The header's columns: each a column of the table the caller may
    /// write, as a JSON insert checks them.
    fn header_of(&self) -> Result<Vec<usize>, DataError> {
        let (table, names) = (&self.chunk.table, self.names.as_deref().unwrap_or_default());
        // The staged rows hold each row's line beside its fields, within
        // PostgreSQL's 1,600 columns.
        if names.len() > COLUMNS_MAX {
            return Err(payload_error(
                "data",
                format!(
                    "names {} columns; an import names at most {COLUMNS_MAX}",
                    names.len()
                ),
            ));
        }
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
        // Hooks published under a staged import: its rows went in without
        // them, so it is refused whole (stale: send it again).
        if self.hooked.is_none() && !table.hooks_of(WriteEvent::Insert).is_empty() {
            return Err(DataError::Store(kernel::StoreError::Stale));
        }
        let chunk = &mut self.chunk;
        (chunk.table, chunk.principal, chunk.context) = (table, principal, context);
        self.chunk.header = self.header_of()?;
        Ok(())
    }

    /// Sends the rows waiting to the staged rows (the transaction opened
    /// with the first of them), and, once a chunk's worth is staged, the
    /// insert of that chunk.
    async fn stage(&mut self) -> Result<(), DataError> {
        if self.hooked.is_some() {
            return self.insert_hooked().await;
        }
        let (Some(&first), Some(&last)) = (self.lines.first(), self.lines.last()) else {
            return Ok(());
        };
        let txn = match &mut self.txn {
            Some(txn) => txn,
            none => {
                let columns = self.chunk.header.len();
                none.insert(self.chunk.service.store.begin_import(columns).await?)
            }
        };
        txn.stage(&self.pending, &self.lines).await?;
        let (rows, bytes) = (self.lines.len() as u64, self.pending_bytes as u64);
        let unsent = self.unsent.get_or_insert(Lines {
            first,
            last,
            rows: 0,
            bytes: 0,
        });
        unsent.last = last;
        unsent.rows += rows;
        unsent.bytes += bytes;
        self.pending.clear();
        self.lines.clear();
        self.pending_bytes = 0;
        if unsent.rows >= CHUNK_ROWS || unsent.bytes >= CHUNK_BYTES {
            self.send_unsent().await?;
        }
        Ok(())
    }

    /// Sends the insert of the rows staged and not yet sent, once the one
    /// in flight is settled; the next rows are read and staged meanwhile.
    async fn send_unsent(&mut self) -> Result<(), DataError> {
        self.settle().await?;
        let (Some(lines), Some(txn)) = (self.unsent.take(), self.txn.as_mut()) else {
            return Ok(());
        };
        // Every row staged so far: those before it went in.
        let answer = self
            .chunk
            .send(txn.as_mut(), (lines.first, lines.last), true)
            .await?;
        self.in_flight = Some((lines, answer));
        Ok(())
    }

    /// Waits for the insert in flight. Refused on stale shared state, it
    /// is inserted again under the caller of now; refused for a row (or
    /// for its time), its lines are halved to find the first row refused.
    async fn settle(&mut self) -> Result<(), DataError> {
        let Some((lines, answer)) = self.in_flight.take() else {
            return Ok(());
        };
        let refused = match answer.await {
            Ok(rows) => {
                self.inserted += rows;
                return Ok(());
            }
            Err(error) => write_error(&self.chunk.table, error),
        };
        if refused.is_stale() {
            self.refresh().await?;
            return self.insert_lines(lines.first, lines.last, None).await;
        }
        self.insert_lines(lines.first, lines.last, Some(refused))
            .await
    }

    /// Inserts the staged rows of lines `first..=last` (`refused` already,
    /// when their insert was). When the database refuses a row of them,
    /// the lines are halved until the first row refused is found (the
    /// halves that go in are kept, so a row refused for a row before it is
    /// found as a row-by-row insert would find it) and its error answered
    /// with its line; lines whose insert ran past the statement timeout are
    /// halved too, and go in as smaller inserts. Any other refusal (the
    /// connection lost, the credential gone) is answered as it is.
    async fn insert_lines(
        &mut self,
        first: u64,
        last: u64,
        mut refused: Option<DataError>,
    ) -> Result<(), DataError> {
        let (mut from, mut to) = (first, last);
        loop {
            let error = match refused.take() {
                Some(error) => error,
                None => match self.insert_current(from, to).await {
                    Ok(()) if to == last => return Ok(()),
                    Ok(()) => {
                        // The rest, once the part that went in is known.
                        (from, to) = (to + 1, last);
                        continue;
                    }
                    Err(error) => error,
                },
            };
            let timed_out = matches!(error, DataError::Store(kernel::StoreError::QueryTimeout));
            if !timed_out && !of_a_row(&error) {
                return Err(error);
            }
            if from == to {
                return Err(match timed_out {
                    true => error,
                    false => error.at(Place::Line(from)),
                });
            }
            to = from + (to - from) / 2;
        }
    }

    /// `result`, unless a row read before its error is refused: then that
    /// row's error (the rows read before it are staged and inserted first).
    /// After an error the import is over.
    async fn settled(&mut self, result: Result<(), DataError>) -> Result<(), DataError> {
        let Err(error) = result else {
            return Ok(());
        };
        self.failed = true;
        let earlier = match self.stage().await {
            Ok(()) => self.send_unsent().await,
            refused => refused,
        };
        let earlier = earlier.and(self.settle().await);
        match (earlier, line_of(&error)) {
            (Err(earlier), Some(line)) if line_of(&earlier).is_some_and(|at| at > line) => {
                Err(error)
            }
            (Err(earlier), _) => Err(earlier),
            (Ok(()), _) => Err(error),
        }
    }

    /// Inserts the staged rows of lines `first..=last` in the open
    /// transaction; when the shared state moved under the import (the
    /// statement found its versions stale and was undone), the caller is
    /// resolved again and the rows inserted under the grants of now.
    async fn insert_current(&mut self, first: u64, last: u64) -> Result<(), DataError> {
        for _ in 0..2 {
            let Some(txn) = self.txn.as_mut() else {
                return Ok(());
            };
            let sent = self.chunk.send(txn.as_mut(), (first, last), false).await?;
            match sent.await.map_err(|e| write_error(&self.chunk.table, e)) {
                Err(error) if error.is_stale() => self.refresh().await?,
                Err(error) => return Err(error),
                Ok(rows) => {
                    self.inserted += rows;
                    return Ok(());
                }
            }
        }
        Err(DataError::Store(kernel::StoreError::Stale))
    }
}

/// The import's table, caller and header.
struct Chunk {
    service: DataService,
    table: Arc<Table>,
    principal: Principal,
    ip: Option<String>,
    context: Context,
    header: Vec<usize>,
}

impl Chunk {
    /// Sends the insert of the staged rows of `lines` (in a savepoint of
    /// `txn`; `whole` when they are every row staged so far), audited as
    /// `data.import` with their count and first and last line; its answer
    /// is how many there were.
    async fn send(
        &self,
        txn: &mut dyn ImportTransaction,
        (first, last): (u64, u64),
        whole: bool,
    ) -> Result<WriteAnswer, DataError> {
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
        if let Value::Object(details) = &mut audit.details {
            details.insert("lines".into(), json!([first, last]));
        }
        let write = Write {
            change: Change::InsertStaged {
                columns,
                lines: (first, last),
            },
            check: narrowed.row_filters(),
            returning: Shown::default(),
            guard_admin_power: !self.principal.admin,
            audit,
        };
        txn.send_write(table, (&write, whole), &self.context)
            .await
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
        if text.contains('\0') {
            return Err(payload_error(
                column.name.clone(),
                "holds a NUL character, which no PostgreSQL text can",
            ));
        }
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

/// Whether a refused insert of staged rows was refused for a row (its
/// value, a check, a key, a grant's filter) rather than for the statement
/// (a timeout, the connection or the database unavailable, the caller's
/// credential gone).
fn of_a_row(error: &DataError) -> bool {
    !matches!(
        error,
        DataError::Auth(_)
            | DataError::Store(
                kernel::StoreError::QueryTimeout
                    | kernel::StoreError::Unavailable(_)
                    | kernel::StoreError::Internal(_)
                    | kernel::StoreError::Stale
            )
    )
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
