//! A CSV import into a table with insert hooks: each row goes in as a JSON
//! insert would, after the table's hooks ran on it, in the import's own
//! transaction (each row under a savepoint), rather than through staging.

use serde_json::{Map, Value};
use tokio::sync::Mutex;

use super::Import;
use crate::callers::Caller;
use crate::error::{DataError, Place};
use crate::query::DataTransaction;
use crate::service::{Target, Via};
use crate::table::{Kind, Table};

impl Import {
    /// Inserts the rows waiting one by one as JSON inserts, each after the
    /// table's hooks ran on it, in the hooked import's transaction; a
    /// refusal names the row's line. Shared state that moved under the
    /// import is resolved again, as for staged rows.
    pub(super) async fn insert_hooked(&mut self) -> Result<(), DataError> {
        let rows = std::mem::take(&mut self.pending);
        let lines = std::mem::take(&mut self.lines);
        self.pending_bytes = 0;
        if rows.is_empty() {
            return Ok(());
        }
        // The transaction is held here while the rows go in (a refresh
        // needs the import), and kept for the next rows.
        let txn = match self.hooked.as_mut().and_then(Option::take) {
            Some(txn) => txn,
            None => Mutex::new(self.chunk.service.store.begin().await?),
        };
        let inserted = self.insert_rows(&txn, rows, lines).await;
        self.hooked = Some(Some(txn));
        inserted
    }

    /// Inserts `rows` (read at `lines`) in `txn`, one statement each.
    async fn insert_rows(
        &mut self,
        txn: &Mutex<Box<dyn DataTransaction>>,
        rows: Vec<Vec<Option<String>>>,
        lines: Vec<u64>,
    ) -> Result<(), DataError> {
        for (fields, line) in rows.into_iter().zip(lines) {
            let row = Value::Object(json_row(&self.chunk.table, &self.chunk.header, fields));
            // A row refused on stale shared state was undone (its
            // savepoint): it goes in again under the caller of now.
            for attempt in 0..2 {
                let chunk = &self.chunk;
                let caller = Caller {
                    principal: &chunk.principal,
                    zone_header: self.zone_header.as_deref(),
                    ip: chunk.ip.as_deref(),
                };
                let target = Target::exposed(&chunk.table.schema, &chunk.table.name);
                let version = chunk.context.versions.auth;
                let inserted = chunk
                    .service
                    .insert_via(caller, version, target, (&row, None), Via::Savepoints(txn))
                    .await;
                match inserted {
                    Ok(_) => break,
                    Err(error) if error.is_stale() && attempt == 0 => self.refresh().await?,
                    Err(error) => return Err(error.at(Place::Line(line))),
                }
            }
            self.inserted += 1;
        }
        Ok(())
    }
}

/// A record's checked fields (in the `header`'s order) as the JSON row an
/// insert sends: integers, exact numbers, booleans and JSON as themselves,
/// the rest as text.
fn json_row(table: &Table, header: &[usize], fields: Vec<Option<String>>) -> Map<String, Value> {
    header
        .iter()
        .zip(fields)
        .map(|(&index, field)| {
            let column = &table.columns[index];
            let value = match (column.kind, field) {
                (_, None) => Value::Null,
                (Kind::Json | Kind::Jsonb | Kind::Boolean, Some(text)) => {
                    serde_json::from_str(&text).unwrap_or(Value::String(text))
                }
                (Kind::Integer, Some(text)) => match text.trim().parse::<i64>() {
                    Ok(n) => n.into(),
                    Err(_) => Value::String(text),
                },
                // A number only when it is exactly the text (no digit of a
                // `numeric` lost to a double); else the text, which the
                // database reads exactly.
                (Kind::Number, Some(text)) => {
                    match serde_json::from_str::<serde_json::Number>(text.trim()) {
                        Ok(n) if n.to_string() == text.trim() => Value::Number(n),
                        _ => Value::String(text),
                    }
                }
                (_, Some(text)) => Value::String(text),
            };
            (column.name.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::Column;

    #[test]
    fn fields_of_a_hooked_import_become_json_without_losing_digits() {
        let column = |name: &str, kind| Column::plain(name, name, kind, true);
        let table = Table {
            resource_id: uuid::Uuid::nil(),
            schema: "app".into(),
            name: "t".into(),
            exposed_methods: Vec::new(),
            columns: vec![
                column("n", Kind::Integer),
                column("p", Kind::Number),
                column("q", Kind::Number),
                column("b", Kind::Boolean),
                column("s", Kind::Text),
            ],
            key: Vec::new(),
            check_messages: Default::default(),
            scopes: Vec::new(),
            foreign_keys: Vec::new(),
            unique_keys: Vec::new(),
            hooks: Vec::new(),
            version: 0,
        };
        let fields = ["42", "2.5", "12345678901234567.89", "true", "007"]
            .map(|f| Some(f.to_owned()))
            .to_vec();
        let row = json_row(&table, &[0, 1, 2, 3, 4], fields);
        assert_eq!(
            Value::Object(row),
            json!({ "n": 42, "p": 2.5, "q": "12345678901234567.89", "b": true, "s": "007" })
        );
    }
}
