//! A Data API transaction (batches, imports) on one of the pool's
//! connections, held as the driver's own so that an import can `COPY` its
//! rows: each chunk is copied into a temporary scratch table of the
//! header's columns (typed as the target's), then inserted from it by the
//! write's one guarded statement.

use async_trait::async_trait;
use data::{Change, Column, Context, DataTransaction, Found, Read, Table, Write};
use kernel::StoreError;
use kernel::sql::quote_ident;
use sea_orm::sqlx::{self, Postgres};

use super::body;
use super::write::{IMPORT_SCRATCH, write_sql};
use crate::{PgStore, map_sqlx};

/// A Data API transaction on one of the pool's connections.
pub(super) struct PgDataTransaction {
    store: PgStore,
    txn: sqlx::Transaction<'static, Postgres>,
    /// The scratch table's source (target and columns) once it is made,
    /// and whether rows were copied into it since it was last emptied.
    scratch: Option<(String, bool)>,
}

impl PgDataTransaction {
    /// Begins a transaction on a connection of `store`'s pool.
    pub(super) async fn begin(store: &PgStore) -> Result<Self, StoreError> {
        let mut txn = store
            .db
            .get_postgres_connection_pool()
            .begin()
            .await
            .map_err(map_sqlx)?;
        // A client that stops sending (an import's body, say) does not hold
        // the connection and its locks for longer than this.
        sqlx::raw_sql("SET LOCAL idle_in_transaction_session_timeout = '60s'")
            .execute(&mut *txn)
            .await
            .map_err(map_sqlx)?;
        Ok(Self {
            store: store.clone(),
            txn,
            scratch: None,
        })
    }

    /// Runs `sql` (statements without parameters) in the transaction.
    async fn execute(&mut self, sql: String) -> Result<(), StoreError> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *self.txn)
            .await
            .map(|_| ())
            .map_err(map_sqlx)
    }

    /// Makes the scratch table ready, empty, for an import's write among
    /// `writes`: made (again) when its source changed, emptied when rows
    /// were copied into it. Outside any savepoint, so that a refused chunk
    /// keeps it, and `TRUNCATE` of a table made in this transaction is
    /// done in place.
    async fn ready_scratch(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
    ) -> Result<(), StoreError> {
        let Some(columns) = writes.iter().find_map(|w| match &w.change {
            Change::InsertText { columns, .. } => Some(columns),
            _ => None,
        }) else {
            return Ok(());
        };
        let source = scratch_source(table, columns);
        let scratch = format!("pg_temp.{}", quote_ident(IMPORT_SCRATCH));
        match &self.scratch {
            Some((made, false)) if *made == source => return Ok(()),
            Some((made, true)) if *made == source => {
                self.execute(format!("TRUNCATE {scratch}")).await?;
            }
            made => {
                let drop = if made.is_some() {
                    format!("DROP TABLE {scratch}; ")
                } else {
                    String::new()
                };
                self.execute(format!(
                    "{drop}CREATE TEMPORARY TABLE {scratch} ON COMMIT DROP AS {source} WITH NO DATA"
                ))
                .await?;
            }
        }
        self.scratch = Some((source, false));
        Ok(())
    }

    /// Runs `writes`, an import's rows first copied into the scratch table
    /// its statement reads.
    async fn run(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut out = Vec::with_capacity(writes.len());
        for write in writes {
            if let Change::InsertText { columns, rows } = &write.change {
                self.copy(columns, rows).await?;
            }
            out.push(body(&mut *self.txn, write_sql(table, write, context)?).await?);
        }
        Ok(out)
    }

    /// Copies `rows` (of `columns`) into the scratch table.
    async fn copy(
        &mut self,
        columns: &[&Column],
        rows: &[Vec<Option<String>>],
    ) -> Result<(), StoreError> {
        if let Some((_, copied)) = &mut self.scratch {
            *copied = true;
        }
        let names: Vec<String> = columns.iter().map(|c| quote_ident(&c.name)).collect();
        let statement = format!(
            "COPY pg_temp.{} ({}) FROM STDIN WITH (FORMAT csv)",
            quote_ident(IMPORT_SCRATCH),
            names.join(", ")
        );
        let mut copy = self.txn.copy_in_raw(&statement).await.map_err(map_sqlx)?;
        let sent = copy.send(copy_csv(rows)).await.map(|_| ());
        match sent {
            Ok(()) => copy.finish().await.map(|_| ()).map_err(map_sqlx),
            Err(error) => {
                let _ = copy.abort("the import's rows could not be sent").await;
                Err(map_sqlx(error))
            }
        }
    }
}

/// `SELECT` of `columns` of `table`: the scratch table is made from it, so
/// each of its columns has the type and modifier of the target's.
fn scratch_source(table: &Table, columns: &[&Column]) -> String {
    let names: Vec<String> = columns.iter().map(|c| quote_ident(&c.name)).collect();
    format!(
        "SELECT {} FROM {}.{}",
        names.join(", "),
        quote_ident(&table.schema),
        quote_ident(&table.name)
    )
}

/// Rows as `COPY … (FORMAT csv)` reads them: every value quoted (so an
/// empty text, or `\.`, is a value), NULL as nothing.
fn copy_csv(rows: &[Vec<Option<String>>]) -> Vec<u8> {
    let size: usize = rows
        .iter()
        .flatten()
        .map(|field| field.as_ref().map_or(1, |text| text.len() + 3))
        .sum();
    let mut out = Vec::with_capacity(size + rows.len());
    for row in rows {
        for (i, field) in row.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some(text) = field else { continue };
            out.push(b'"');
            for byte in text.bytes() {
                if byte == b'"' {
                    out.push(b'"');
                }
                out.push(byte);
            }
            out.push(b'"');
        }
        out.push(b'\n');
    }
    out
}

#[async_trait]
impl DataTransaction for PgDataTransaction {
    async fn read(
        &mut self,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Found, StoreError> {
        self.store
            .read_json(&mut *self.txn, table, read, context)
            .await
    }

    async fn write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        self.ready_scratch(table, writes).await?;
        self.run(table, writes, context).await
    }

    async fn try_write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        self.ready_scratch(table, writes).await?;
        self.execute("SAVEPOINT data_write".into()).await?;
        match self.run(table, writes, context).await {
            Ok(out) => {
                self.execute("RELEASE SAVEPOINT data_write".into()).await?;
                Ok(out)
            }
            Err(error) => {
                self.execute("ROLLBACK TO SAVEPOINT data_write".into())
                    .await?;
                Err(error)
            }
        }
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        self.txn.commit().await.map_err(map_sqlx)
    }
}

#[cfg(test)]
mod tests {
    use super::copy_csv;

    #[test]
    fn copied_rows_quote_every_value_and_leave_nulls_empty() {
        let rows = vec![
            vec![Some("say \"hi\"\n\\o/".to_owned()), Some(String::new())],
            vec![None, Some("\\.".to_owned())],
        ];
        assert_eq!(
            String::from_utf8(copy_csv(&rows)).unwrap(),
            "\"say \"\"hi\"\"\n\\o/\",\"\"\n,\"\\.\"\n"
        );
        assert!(copy_csv(&[]).is_empty());
    }
}
