//! The Data API's store: the catalog of resources (columns, key, grants),
//! cached per instance and checked by version, and one SQL statement per
//! request, built with sea-query from checked column names and bound values.
//! Reads select rows in binary and write the JSON in Rust (`json_rows`);
//! writes and counted lists have their JSON built by PostgreSQL.

mod answer;
mod catalog;
mod changes;
mod export;
mod import;
mod reads;
mod rpc;
mod sql;
mod view_sql;
mod write;

use std::sync::Arc;

use crate::db::Txn;
use async_trait::async_trait;
use data::{Chunks, Context, DataStore, DataTransaction, Found, ListQuery, Read, Table, Write};
use kernel::StoreError;
use sea_orm::sqlx::Row as _;
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement};

use crate::json_rows::{compact, write_object};
use crate::query::{Begin, Commit, Query};
use crate::replicas::{Replica, settle_checked};
use crate::{PgStore, rows};

pub(crate) use catalog::Catalog;
pub(crate) use changes::changes_sql;
pub(crate) use reads::On;
use reads::{Rows, aggregate_sql};
use view_sql::{params_json, view_sql};
use write::write_sql;

impl PgStore {
    /// Runs one statement answering at most one row.
    async fn row(
        &self,
        conn: &impl ConnectionTrait,
        (sql, values): (String, sea_orm::sea_query::Values),
    ) -> Result<Option<QueryResult>, StoreError> {
        conn.fetch_optional(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            values,
        ))
        .await
    }
}

impl PgStore {
    /// Runs a DataView read: its rows and total, with the statement and
    /// the values it ran with; on a read replica when one is current for
    /// the caller.
    pub(crate) async fn view_rows(
        &self,
        query: &views::query::ViewQuery<'_>,
        context: &Context,
    ) -> Result<views::store::ViewAnswer, StoreError> {
        if let Some((replica, sent)) = self.replica_now().await? {
            // A stale check ends the replica's statement at once.
            let (marks, tried) =
                futures_util::future::try_join(self.primary_check(context), async {
                    let on = On::Replica(sent.as_deref());
                    Ok(self.view_rows_on(replica.db(), query, context, on).await)
                })
                .await?;
            if let Some(answer) = settle_checked(&replica, tried, &marks) {
                return answer;
            }
        }
        self.on_primary();
        self.view_rows_on(&self.db, query, context, On::Primary)
            .await
            .map(|(answer, _)| answer)
    }

    async fn view_rows_on(
        &self,
        db: &crate::db::Db,
        query: &views::query::ViewQuery<'_>,
        context: &Context,
        on: On<'_>,
    ) -> Result<(views::store::ViewAnswer, Option<i64>), StoreError> {
        let (sql, values) = view_sql(query, context, on);
        let params = params_json(&values);
        let row = self
            .row(db, (sql.clone(), values))
            .await?
            .ok_or_else(|| StoreError::Internal("a view read answered no row".into()))?;
        let answer = views::store::ViewAnswer {
            sql,
            params,
            found: Found {
                json: json_of(&row)?,
                total: rows::column(&row, "total")?,
            },
        };
        Ok((answer, snapshot_xmin(&row, on)?))
    }

    /// A published view, from the catalog.
    pub(crate) async fn published(
        &self,
        key: views::store::ViewKey<'_>,
    ) -> Result<Option<Arc<views::store::PublishedView>>, StoreError> {
        let catalog = self.catalog().await?;
        Ok(match key {
            views::store::ViewKey::Slug(slug) => catalog.views.get(slug),
            views::store::ViewKey::Id(id) => catalog.view_ids.get(&id),
        }
        .cloned())
    }

    /// Every published view that serves, by slug.
    pub(crate) async fn all_published(
        &self,
    ) -> Result<Vec<Arc<views::store::PublishedView>>, StoreError> {
        let catalog = self.catalog().await?;
        let mut all: Vec<_> = catalog.views.values().cloned().collect();
        all.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(all)
    }
}

/// Whether PostgreSQL builds a read's JSON: aggregates, counted lists,
/// and reads with to-many related rows, whose size only the statement
/// knows as it runs: PostgreSQL counts them and refuses past the ceiling
/// before sending a byte, so that the instance never holds more than one
/// bounded answer of a read (API.md 17).
fn built_by_postgres(read: &Read<'_>) -> bool {
    fn many(embeds: &[data::Embed<'_>]) -> bool {
        embeds.iter().any(|e| e.many || many(&e.embeds))
    }
    match read {
        Read::Aggregate(_) => true,
        Read::List(query) => query.count || many(&query.embeds),
        Read::One { embeds, .. } => many(embeds),
    }
}

/// The `xmin` a replica's statement answered in `row` beside its JSON.
fn snapshot_xmin(row: &QueryResult, on: On<'_>) -> Result<Option<i64>, StoreError> {
    match on {
        On::Replica(_) => rows::column(row, reads::XMIN_COLUMN),
        On::Primary => Ok(None),
    }
}

/// The JSON PostgreSQL built in column `body`, compact.
fn json_of(row: &QueryResult) -> Result<Option<String>, StoreError> {
    let body: Option<String> = rows::column(row, "body")?;
    Ok(body.map(compact))
}

/// A Data API transaction on one of the pool's connections.
struct PgDataTransaction {
    store: PgStore,
    txn: Txn,
}

/// Logs a Data API read's statement with its values written in, at
/// `trace` level under the target `data_api_sql` (off unless asked for,
/// as `TESSERA_LOG=warn,data_api_sql=trace`, or by a plain `trace`): what
/// `cargo xtask bench related` gives pgbench as the route's statement.
fn trace_statement(sql: &str, values: &sea_orm::sea_query::Values) {
    if tracing::enabled!(target: "data_api_sql", tracing::Level::TRACE) {
        let statement = sea_orm::sea_query::inject_parameters(
            sql,
            &values.0,
            &sea_orm::sea_query::PostgresQueryBuilder,
        );
        tracing::trace!(target: "data_api_sql", "{statement}");
    }
}

impl PgStore {
    /// Runs a read on `conn` with its JSON built by PostgreSQL; on a
    /// replica, with the `xmin` of the statement's snapshot.
    async fn read_json(
        &self,
        conn: &impl ConnectionTrait,
        table: &Table,
        read: &Read<'_>,
        (context, on): (&Context, On<'_>),
    ) -> Result<(Found, Option<i64>), StoreError> {
        let statement = match read {
            Read::Aggregate(query) => aggregate_sql(table, query, context, on),
            _ => Rows::of(read).sql(table, context, true, on),
        };
        trace_statement(&statement.0, &statement.1);
        let row = self
            .row(conn, statement)
            .await?
            .ok_or_else(|| StoreError::Internal("a read answered no row".into()))?;
        let xmin = snapshot_xmin(&row, on)?;
        let total = match read {
            Read::One { .. } => None,
            _ => rows::column(&row, "total")?,
        };
        let body: Option<String> = rows::column(&row, "body")?;
        // The driver's copy of the answer goes before it is compacted.
        drop(row);
        let json = body.map(compact);
        let found = match read {
            // One row: the object itself, or nothing.
            Read::One { .. } => Found {
                json: json.map(|array| {
                    let items = array.trim();
                    items[1..items.len() - 1].to_owned()
                }),
                total,
            },
            _ => Found { json, total },
        };
        Ok((found, xmin))
    }

    /// Runs a read on `replica`, or on the primary when `None`; on a
    /// replica, with the `xmin` of the statement's snapshot when it
    /// answered a row.
    async fn read_at(
        &self,
        replica: Option<&Replica>,
        table: &Table,
        read: &Read<'_>,
        (context, on): (&Context, On<'_>),
    ) -> Result<(Found, Option<i64>), StoreError> {
        let (db, lane) = match replica {
            Some(replica) => (replica.db(), replica.lane()),
            None => (&self.db, &*self.reads),
        };
        if built_by_postgres(read) {
            return self.read_json(db, table, read, (context, on)).await;
        }
        let rows = Rows::of(read);
        let (sql, values) = rows.sql(table, context, false, on);
        trace_statement(&sql, &values);
        let (keys, cells) = rows.layout();
        let list = matches!(read, Read::List(_));
        let mut out = String::with_capacity(1024);
        let mut xmin = None;
        out.push('[');
        // Each row is written as it arrives, and the read stops as soon as
        // the answer passes the ceiling: the instance holds at most the
        // ceiling and one row of it (API.md 17).
        let found = lane
            .each(&sql, values, &mut |row| {
                if out.len() > 1 {
                    out.push(',');
                } else if replica.is_some() {
                    // The statement's last column.
                    xmin = row.try_get(row.len() - 1).ok();
                }
                write_object(&mut out, &row, &keys, &cells)?;
                match out.len() as u64 > context.max_answer_bytes {
                    true => Err(StoreError::AnswerTooLarge),
                    false => Ok(()),
                }
            })
            .await?;
        // A replica's statement fails on stale state rather than finding nothing.
        if found == 0 && replica.is_none() && self.read_versions().await? != context.versions {
            return Err(StoreError::Stale);
        }
        if found == 0 && !list {
            return Ok((Found::default(), xmin));
        }
        out.push(']');
        if !list {
            // One row: the object itself.
            out.remove(0);
            out.pop();
        }
        Ok((
            Found {
                json: Some(out),
                total: None,
            },
            xmin,
        ))
    }

    /// Runs the statements of `writes` on `conn`, one after the other.
    async fn write_on(
        &self,
        conn: &impl ConnectionTrait,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut out = Vec::with_capacity(writes.len());
        for write in writes {
            out.push(self.written(conn, table, write, context).await?);
        }
        Ok(out)
    }

    /// Runs the statement of `write`: its JSON, the write noted for the
    /// request's answer while replicas serve reads.
    async fn written(
        &self,
        conn: &impl ConnectionTrait,
        table: &Table,
        write: &Write<'_>,
        context: &Context,
    ) -> Result<Option<String>, StoreError> {
        let mark = self.replicas.any();
        match self
            .row(conn, write_sql(table, write, context, mark)?)
            .await?
        {
            Some(row) => answered(&row, mark),
            None => Ok(None),
        }
    }
}

/// The answer of a write's statement (`row`): its JSON, the write noted
/// for the request's answer when the statement was `mark`ed (replicas).
fn answered(row: &QueryResult, mark: bool) -> Result<Option<String>, StoreError> {
    if mark {
        let lsn: Option<i64> = rows::column(row, "mark_lsn")?;
        let xid: Option<i64> = rows::column(row, "mark_xid")?;
        if let (Some(lsn), Some(xid)) = (lsn, xid) {
            data::consistency::note(data::consistency::Token {
                lsn: u64::try_from(lsn).unwrap_or(0),
                xid: u64::try_from(xid).unwrap_or(0),
            });
        }
    }
    json_of(row)
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
            .read_json(&self.txn, table, read, (context, On::Primary))
            .await
            .map(|(found, _)| found)
    }

    async fn write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        self.store.write_on(&self.txn, table, writes, context).await
    }

    async fn try_write(
        &mut self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        let txn = &self.txn;
        let savepoint = |sql: &'static str| async move { txn.run_unprepared(sql).await };
        savepoint("SAVEPOINT data_write").await?;
        match self.store.write_on(txn, table, writes, context).await {
            Ok(out) => {
                savepoint("RELEASE SAVEPOINT data_write").await?;
                Ok(out)
            }
            Err(error) => {
                savepoint("ROLLBACK TO SAVEPOINT data_write").await?;
                Err(error)
            }
        }
    }

    async fn commit(self: Box<Self>) -> Result<(), StoreError> {
        self.txn.commit_txn().await
    }
}

#[async_trait]
impl DataStore for PgStore {
    async fn export(
        &self,
        table: &Table,
        query: &ListQuery<'_>,
        all: bool,
        context: &Context,
    ) -> Result<Chunks, StoreError> {
        self.export_csv(table, query, all, context).await
    }

    async fn begin(&self) -> Result<Box<dyn DataTransaction>, StoreError> {
        let txn = self.db.open_txn().await?;
        // A client that stops sending (an import's body, say) does not hold
        // the connection and its locks for longer than this.
        txn.run_unprepared("SET LOCAL idle_in_transaction_session_timeout = '60s'")
            .await?;
        Ok(Box::new(PgDataTransaction {
            store: self.clone(),
            txn,
        }))
    }

    async fn begin_import(
        &self,
        columns: usize,
    ) -> Result<Box<dyn data::ImportTransaction>, StoreError> {
        Ok(Box::new(self.open_import(columns).await?))
    }

    async fn table(&self, schema: &str, name: &str) -> Result<Option<Arc<Table>>, StoreError> {
        Ok(self
            .catalog()
            .await?
            .schemas
            .get(schema)
            .and_then(|tables| tables.get(name))
            .cloned())
    }

    async fn tables(&self) -> Result<Vec<Arc<Table>>, StoreError> {
        let catalog = self.catalog().await?;
        let mut tables: Vec<Arc<Table>> = catalog
            .schemas
            .values()
            .flat_map(|tables| tables.values().cloned())
            .collect();
        tables.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        Ok(tables)
    }

    async fn import_max_bytes(&self) -> Result<u64, StoreError> {
        Ok(self.versioned_settings().await?.0.data_import_max_bytes())
    }

    async fn statement_settings(&self) -> Result<data::StatementSettings, StoreError> {
        let (settings, version) = self.versioned_settings().await?;
        Ok(data::StatementSettings {
            timezone: settings.system_timezone().map(str::to_owned),
            version,
            max_answer_bytes: settings.data_max_answer_bytes(),
        })
    }

    async fn read(
        &self,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Found, StoreError> {
        // The replica's statement goes out with the primary's check, not
        // after it: the caller waits for the longer of the two.
        if let Some((replica, sent)) = self.replica_now().await? {
            // A stale check ends the replica's statement at once.
            let (marks, tried) =
                futures_util::future::try_join(self.primary_check(context), async {
                    let on = On::Replica(sent.as_deref());
                    Ok(self
                        .read_at(Some(&replica), table, read, (context, on))
                        .await)
                })
                .await?;
            if let Some(answer) = settle_checked(&replica, tried, &marks) {
                return answer;
            }
        }
        self.on_primary();
        self.read_at(None, table, read, (context, On::Primary))
            .await
            .map(|(found, _)| found)
    }

    async fn write(
        &self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        if let [write] = writes {
            return Ok(vec![self.written(&self.db, table, write, context).await?]);
        }
        let txn = self.db.open_txn().await?;
        let out = self.write_on(&txn, table, writes, context).await?;
        txn.commit_txn().await?;
        Ok(out)
    }

    async fn callable(
        &self,
        schema: &str,
        name: &str,
        fresh: bool,
    ) -> Result<Option<Arc<data::Callable>>, StoreError> {
        self.callable_named(schema, name, fresh).await
    }

    async fn call(&self, call: &data::FunctionCall<'_>) -> Result<String, StoreError> {
        self.call_function(call).await
    }
}
