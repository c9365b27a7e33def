//! The Data API's store: the catalog of resources (columns, key, grants),
//! cached per instance and checked by version, and one SQL statement per
//! request, built with sea-query from checked column names and bound values.
//! Reads select rows in binary and write the JSON in Rust (`json_rows`);
//! writes and counted lists have their JSON built by PostgreSQL.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use data::{
    Change, Column, Context, DataStore, Kind, Output, Predicate, Read, Table, Write,
    service_columns, user_column,
};
use kernel::filter::{Filter, Op, Operand};
use kernel::{StoreError, Versions};
use permissions::zone::Period;
use permissions::{Action, Scope};
use sea_orm::sea_query::{
    Alias, CommonTableExpression, Cond, Expr, ExprTrait, Func, Order, PostgresQueryBuilder, Query,
    QueryBuilder, SelectStatement, SqlWriterValues, WithClause,
};
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement, TransactionTrait};
use serde_json::Value;

use crate::json_rows::{Cell, write_object, write_string};
use crate::{PgStore, map_err};

/// Every registered table that exists, by schema and name.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    schemas: HashMap<String, HashMap<String, Arc<Table>>>,
}

/// Resources with their columns (from the catalog), primary key and grants.
const CATALOG_SQL: &str = "SELECT r.id, r.schema_name, r.table_name, r.exposed_methods, r.check_messages, \
    (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), \
        'typname', t.typname, 'category', t.typcategory, 'nullable', NOT a.attnotnull, \
        'hasDefault', a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', \
        'writable', a.attidentity <> 'a' AND a.attgenerated = '') ORDER BY a.attnum) \
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns, \
    (SELECT json_agg(a.attname ORDER BY k.ord) FROM pg_index i \
        CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = c.oid AND i.indisprimary) AS key, \
    (SELECT json_agg(json_build_object('roleId', g.role_id, 'action', g.action, 'filter', g.filter, 'columns', g.columns)) \
     FROM svc.grants g WHERE g.resource_id = r.id) AS grants \
    FROM svc.resources r \
    JOIN pg_class c ON c.oid = to_regclass(quote_ident(r.schema_name) || '.' || quote_ident(r.table_name))";

impl PgStore {
    /// The catalog, loaded again when a round trip has seen a newer version.
    async fn catalog(&self) -> Result<Arc<Catalog>, StoreError> {
        if let Some((cached, _)) = self.catalog.get(self.seen.catalog()) {
            return Ok(cached);
        }
        let version = self.read_versions().await?.catalog;
        let rows = self
            .db
            .query_all_raw(Statement::from_string(DbBackend::Postgres, CATALOG_SQL))
            .await
            .map_err(map_err)?;
        let mut catalog = Catalog::default();
        for row in rows {
            if let Some(table) = table_of(&row, version)? {
                catalog
                    .schemas
                    .entry(table.schema.clone())
                    .or_default()
                    .insert(table.name.clone(), Arc::new(table));
            }
        }
        let catalog = Arc::new(catalog);
        self.catalog.put(catalog.clone(), version);
        Ok(catalog)
    }

    /// Runs one statement answering at most one row.
    async fn row(
        &self,
        conn: &impl ConnectionTrait,
        (sql, values): (String, sea_orm::sea_query::Values),
    ) -> Result<Option<QueryResult>, StoreError> {
        conn.query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            values,
        ))
        .await
        .map_err(map_err)
    }

    /// Runs one statement whose single column `body` is JSON text.
    async fn body(
        &self,
        conn: &impl ConnectionTrait,
        statement: (String, sea_orm::sea_query::Values),
    ) -> Result<Option<String>, StoreError> {
        match self.row(conn, statement).await? {
            Some(row) => row.try_get("", "body").map_err(map_err),
            None => Ok(None),
        }
    }
}

fn table_of(row: &QueryResult, version: i64) -> Result<Option<Table>, StoreError> {
    let schema: String = row.try_get("", "schema_name").map_err(map_err)?;
    let name: String = row.try_get("", "table_name").map_err(map_err)?;
    let Some(shown) = service_columns(&schema, &name) else {
        return Ok(None);
    };
    let raw_columns: Option<Value> = row.try_get("", "columns").map_err(map_err)?;
    let columns: Vec<Column> = raw_columns
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
            let flag = |key: &str| c.get(key).and_then(Value::as_bool).unwrap_or(false);
            let name = text("name");
            if shown.is_some_and(|list| !list.contains(&name)) {
                return None;
            }
            Some(Column {
                name: name.to_owned(),
                sql_type: text("type").to_owned(),
                kind: Kind::classify(text("typname"), text("category")),
                nullable: flag("nullable"),
                has_default: flag("hasDefault"),
                writable: flag("writable"),
            })
        })
        .collect();
    let key_names: Option<Value> = row.try_get("", "key").map_err(map_err)?;
    let key_names: Vec<&str> = key_names
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let key: Vec<usize> = key_names
        .iter()
        .map(|k| columns.iter().position(|c| c.name == *k))
        .collect::<Option<_>>()
        .unwrap_or_default();
    let messages: Value = row.try_get("", "check_messages").map_err(map_err)?;
    let check_messages: BTreeMap<String, String> =
        serde_json::from_value(messages).unwrap_or_default();
    let grants: Option<Value> = row.try_get("", "grants").map_err(map_err)?;
    let scopes = grants
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(scope_of)
        .collect();
    Ok(Some(Table {
        resource_id: row.try_get("", "id").map_err(map_err)?,
        schema,
        name,
        exposed_methods: row.try_get("", "exposed_methods").map_err(map_err)?,
        columns,
        key,
        check_messages,
        scopes,
        version,
    }))
}

/// A stored grant, as the catalog query lists it.
fn scope_of(grant: &Value) -> Option<Scope> {
    Scope::new(
        grant.get("roleId")?.as_str()?.parse().ok()?,
        Action::parse(grant.get("action")?.as_str()?)?,
        grant.get("filter"),
        match grant.get("columns") {
            Some(Value::Array(list)) => Some(
                list.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect(),
            ),
            _ => None,
        },
    )
}

/// `"name"`, for the few places a name is spliced (a record type); names come from the catalog.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Which relation column references point at.
#[derive(Clone, Copy)]
enum Rel<'a> {
    /// An alias, such as `r` or the CTE `w`.
    Alias(&'static str),
    /// The schema-qualified table (UPDATE and DELETE targets).
    Table(&'a Table),
}

/// Turns the Data API's parsed queries into sea-query expressions.
struct Sql<'a> {
    table: &'a Table,
    context: &'a Context,
    rel: Rel<'a>,
    /// Masked columns, for the caller's own filter and sort.
    masks: &'a [Output<'a>],
}

impl Sql<'_> {
    fn col(&self, column: &Column) -> Expr {
        match self.rel {
            Rel::Alias(alias) => Expr::col((Alias::new(alias), Alias::new(&column.name))),
            Rel::Table(t) => Expr::col((
                Alias::new(&t.schema),
                Alias::new(&t.name),
                Alias::new(&column.name),
            )),
        }
    }

    /// A text value cast to the column's type.
    fn cast(column: &Column, text: String) -> Expr {
        Func::cast_as(Expr::val(text), Alias::new(&column.sql_type)).into()
    }

    fn predicate(&self, predicate: &Predicate<'_>) -> Expr {
        match predicate {
            Predicate::All(parts) => self.join(parts.iter().map(|p| self.predicate(p)), true),
            Predicate::Any(parts) => self.join(parts.iter().map(|p| self.predicate(p)), false),
            Predicate::Filter(filter) => self.filter(filter, false),
            Predicate::Own(filter) => self.filter(filter, true),
            Predicate::Key(pairs) => self.join(
                pairs
                    .iter()
                    .map(|(c, v)| self.col(c).eq(Self::cast(c, (*v).to_owned()))),
                true,
            ),
        }
    }

    fn join(&self, parts: impl Iterator<Item = Expr>, all: bool) -> Expr {
        let mut cond = if all { Cond::all() } else { Cond::any() };
        let mut empty = true;
        for part in parts {
            cond = cond.add(part);
            empty = false;
        }
        match (empty, all) {
            (true, true) => Expr::cust("TRUE"),
            (true, false) => Expr::cust("FALSE"),
            _ => cond.into(),
        }
    }

    /// A filter; `masked` reads columns through their masks (the caller's own filter).
    fn filter(&self, filter: &Filter, masked: bool) -> Expr {
        match filter {
            Filter::And(items) => self.join(items.iter().map(|f| self.filter(f, masked)), true),
            Filter::Or(items) => self.join(items.iter().map(|f| self.filter(f, masked)), false),
            Filter::Not(inner) => self.filter(inner, masked).not(),
            Filter::Condition {
                column,
                op,
                operand,
            } => match self.table.column(column) {
                Some(column) if masked => self.condition(self.shown(column), column, *op, operand),
                Some(column) => self.condition(self.col(column), column, *op, operand),
                // A grant naming a column dropped since matches nothing.
                None => Expr::cust("FALSE"),
            },
        }
    }

    /// A column as the caller sees it: masked on rows its grants do not show it.
    fn shown(&self, column: &Column) -> Expr {
        match self.masks.iter().find(|m| m.column.name == column.name) {
            Some(mask) => self.output(mask),
            None => self.col(column),
        }
    }

    fn condition(&self, col: Expr, column: &Column, op: Op, operand: &Operand) -> Expr {
        if let Operand::Period(name) = operand {
            let period = Period::resolve(name, self.context.now, self.context.zone);
            if period.is_span() {
                let start = Self::cast(column, instant(column, period.start));
                let end = Self::cast(column, instant(column, period.end));
                return match op {
                    Op::Eq | Op::In => col.clone().gte(start).and(col.lt(end)),
                    Op::Neq | Op::Nin => col.clone().lt(start).or(col.gte(end)),
                    Op::Gt => col.gte(end),
                    Op::Gte => col.gte(start),
                    Op::Lt => col.lt(start),
                    Op::Lte => col.lt(end),
                    _ => Expr::cust("FALSE"),
                };
            }
        }
        match (op, operand) {
            (Op::IsNull, Operand::Literal(Value::Bool(true))) => col.is_null(),
            (Op::IsNull, _) => col.is_not_null(),
            (Op::Eq, Operand::Literal(Value::Null)) => col.is_null(),
            (Op::Neq, Operand::Literal(Value::Null)) => col.is_not_null(),
            (Op::In | Op::Nin, Operand::List(items)) if items.is_empty() => {
                Expr::cust(if op == Op::In { "FALSE" } else { "TRUE" })
            }
            (Op::In, Operand::List(items)) => {
                col.is_in(items.iter().map(|i| self.operand(column, i)))
            }
            (Op::Nin, Operand::List(items)) => {
                col.is_not_in(items.iter().map(|i| self.operand(column, i)))
            }
            (Op::Like, _) => col.like_expr(self.operand(column, operand), "LIKE"),
            (Op::Ilike, _) => col.like_expr(self.operand(column, operand), "ILIKE"),
            (op, operand) => {
                let value = self.operand(column, operand);
                match op {
                    Op::Eq => col.eq(value),
                    Op::Neq => col.ne(value),
                    Op::Gt => col.gt(value),
                    Op::Gte => col.gte(value),
                    Op::Lt => col.lt(value),
                    _ => col.lte(value),
                }
            }
        }
    }

    fn operand(&self, column: &Column, operand: &Operand) -> Expr {
        match operand {
            Operand::Literal(Value::Null) => Expr::cust("NULL"),
            Operand::Literal(value) => Self::cast(column, literal_text(column.kind, value)),
            Operand::User(name) if name == "id" => Func::cast_as(
                Expr::val(self.context.user_id),
                Alias::new(&column.sql_type),
            )
            .into(),
            Operand::User(name) if user_column(name) => {
                let lookup = Query::select()
                    .expr(Expr::col((Alias::new("caller"), Alias::new(name))))
                    .from_as(
                        (Alias::new("svc"), Alias::new("users")),
                        Alias::new("caller"),
                    )
                    .and_where(
                        Expr::col((Alias::new("caller"), Alias::new("id")))
                            .eq(self.context.user_id),
                    )
                    .to_owned();
                Func::cast_as(
                    Expr::SubQuery(None, Box::new(lookup.into())),
                    Alias::new(&column.sql_type),
                )
                .into()
            }
            Operand::User(_) | Operand::List(_) => Expr::cust("NULL"),
            Operand::Period(name) => {
                let period = Period::resolve(name, self.context.now, self.context.zone);
                Self::cast(column, instant(column, period.start))
            }
        }
    }

    /// An answer column; masked columns show only on rows their grants reach.
    fn output(&self, output: &Output<'_>) -> Expr {
        match &output.mask {
            None => self.col(output.column),
            Some(filters) => Expr::case(
                self.join(filters.iter().map(|f| self.filter(f, false)), false),
                self.col(output.column),
            )
            .into(),
        }
    }

    /// `SELECT <outputs>` as [`Cell`]s read them: common types as they are,
    /// others as `to_json(<value>)::text`.
    fn cells(&self, outputs: &[Output<'_>]) -> SelectStatement {
        let mut select = Query::select();
        for output in outputs {
            let value = self.output(output);
            select.expr(match Cell::of(output.column) {
                Cell::Json => Func::cast_as(
                    Func::cust(Alias::new("to_json")).arg(value),
                    Alias::new("text"),
                )
                .into(),
                _ => value,
            });
        }
        if outputs.is_empty() {
            select.expr(Expr::cust("1"));
        }
        select
    }

    /// `SELECT <outputs> FROM <rel>`, aliased `x` by the caller.
    fn outputs(&self, outputs: &[Output<'_>]) -> SelectStatement {
        let mut select = Query::select();
        for output in outputs {
            select.expr_as(self.output(output), Alias::new(&output.column.name));
        }
        if outputs.is_empty() {
            select.expr_as(Expr::cust("1"), Alias::new("n"));
        }
        select
    }
}

trait LikeExpr {
    fn like_expr(self, pattern: Expr, op: &'static str) -> Expr;
}

impl LikeExpr for Expr {
    fn like_expr(self, pattern: Expr, op: &'static str) -> Expr {
        let template = if op == "LIKE" {
            "$1 LIKE $2"
        } else {
            "$1 ILIKE $2"
        };
        Expr::cust_with_exprs(template, [self, pattern])
    }
}

/// A JSON literal as the text PostgreSQL parses into the column's type.
fn literal_text(kind: Kind, value: &Value) -> String {
    match (kind, value) {
        (Kind::Json | Kind::Jsonb, v) => v.to_string(),
        (_, Value::String(s)) => s.clone(),
        (_, v) => v.to_string(),
    }
}

/// An instant as text for a date, timestamp or timestamptz column.
fn instant(column: &Column, at: chrono::DateTime<chrono_tz::Tz>) -> String {
    match column.kind {
        Kind::Date => at.date_naive().to_string(),
        Kind::Timestamp => at.naive_local().format("%Y-%m-%d %H:%M:%S%.f").to_string(),
        _ => at.to_rfc3339(),
    }
}

fn table_ref(table: &Table) -> (Alias, Alias) {
    (Alias::new(&table.schema), Alias::new(&table.name))
}

fn build(
    statement: &impl sea_orm::sea_query::QueryStatementBuilder,
) -> (String, sea_orm::sea_query::Values) {
    statement.build_any(&PostgresQueryBuilder)
}

/// `SELECT json_agg(x)::text AS body FROM (<rows>) AS x`.
fn aggregate(rows: SelectStatement) -> SelectStatement {
    Query::select()
        .expr_as(Expr::cust("json_agg(\"x\")::text"), Alias::new("body"))
        .from_subquery(rows, Alias::new("x"))
        .to_owned()
}

/// The SQL of one write: a data-modifying CTE `w`, the audit entry when a row
/// changed, and the rows as JSON, each checked against the grants.
pub(crate) fn write_sql(
    table: &Table,
    write: &Write<'_>,
    context: &Context,
) -> Result<(String, sea_orm::sea_query::Values), StoreError> {
    let target = Sql {
        table,
        context,
        rel: Rel::Table(table),
        masks: &[],
    };
    let record_type = format!("NULL::{}.{}", quoted(&table.schema), quoted(&table.name));
    let all_columns = || table.columns.iter().map(|c| Alias::new(&c.name));
    let change: sea_orm::sea_query::SubQueryStatement = match &write.change {
        // Rows that name no column take every default.
        Change::Insert { columns, rows } if columns.is_empty() => Query::insert()
            .into_table(table_ref(table))
            .or_default_values_many(u32::try_from(rows.len()).unwrap_or(u32::MAX))
            .returning(Query::returning().columns(all_columns()))
            .to_owned()
            .into(),
        Change::Insert { columns, rows } => {
            let json =
                serde_json::to_string(rows).map_err(|e| StoreError::Internal(e.to_string()))?;
            let source = Func::cust(Alias::new("json_populate_recordset"))
                .arg(Expr::cust(record_type))
                .arg(Func::cast_as(Expr::val(json), Alias::new("json")));
            let mut select = Query::select();
            for column in columns {
                select.expr(Expr::col((Alias::new("j"), Alias::new(&column.name))));
            }
            select.from_function(source, Alias::new("j"));
            Query::insert()
                .into_table(table_ref(table))
                .columns(columns.iter().map(|c| Alias::new(&c.name)))
                .select_from(select)
                .map_err(|e| StoreError::Internal(e.to_string()))?
                .returning(Query::returning().columns(all_columns()))
                .to_owned()
                .into()
        }
        Change::Update {
            columns,
            values,
            predicate,
        } => {
            let json =
                serde_json::to_string(values).map_err(|e| StoreError::Internal(e.to_string()))?;
            let mut update = Query::update();
            update.table(table_ref(table));
            for column in columns {
                let record = Func::cust(Alias::new("json_populate_record"))
                    .arg(Expr::cust(record_type.clone()))
                    .arg(Func::cast_as(Expr::val(json.clone()), Alias::new("json")));
                update.value(
                    Alias::new(&column.name),
                    Expr::cust_with_exprs(
                        format!("($1).{}", quoted(&column.name)),
                        [record.into()],
                    ),
                );
            }
            update
                .cond_where(target.predicate(predicate))
                .returning(Query::returning().columns(all_columns()))
                .to_owned()
                .into()
        }
        Change::Delete { predicate } => Query::delete()
            .from_table(table_ref(table))
            .cond_where(target.predicate(predicate))
            .returning(Query::returning().columns(all_columns()))
            .to_owned()
            .into(),
    };
    let written = Sql {
        table,
        context,
        rel: Rel::Alias("w"),
        masks: &[],
    };
    let event = &write.audit;
    let keys = table
        .key_columns()
        .map(|c| written.col(c))
        .collect::<Vec<_>>();
    let key_list = if keys.is_empty() {
        Expr::cust("NULL")
    } else {
        let template: Vec<String> = (1..=keys.len()).map(|i| format!("${i}")).collect();
        Expr::cust_with_exprs(template.join(", "), keys)
    };
    let audit_row = Query::select()
        .expr(Expr::val(kernel::new_id()))
        .expr(Expr::val(context.now))
        .expr(Expr::val(event.actor.kind.as_str()))
        .expr(Expr::val(event.actor.id))
        .expr(Expr::val(event.action))
        .expr(Expr::val(event.target.clone()))
        .expr(Expr::cust_with_exprs(
            "CAST($1 AS jsonb) || jsonb_build_object('count', count(*), 'keys', jsonb_agg(jsonb_build_array($2)))",
            [Expr::val(event.details.to_string()), key_list],
        ))
        .expr(Expr::val(event.ip.clone()))
        .from(Alias::new("w"))
        .and_having(Expr::cust("count(*) > 0"))
        .to_owned();
    let audit = Query::insert()
        .into_table((Alias::new("svc"), Alias::new("audit_log")))
        .columns(
            [
                "id",
                "at",
                "actor_type",
                "actor_id",
                "action",
                "target",
                "details",
                "ip",
            ]
            .map(Alias::new),
        )
        .select_from(audit_row)
        .map_err(|e| StoreError::Internal(e.to_string()))?
        .to_owned();
    let mut rows = written.outputs(&write.returning);
    rows.from(Alias::new("w"));
    if let Some(filters) = &write.check {
        rows.and_where(Expr::cust_with_exprs(
            "svc.permit($1)",
            [written.join(filters.iter().map(|f| written.filter(f, false)), false)],
        ));
    }
    let with = WithClause::new()
        .cte(
            CommonTableExpression::new()
                .query(change)
                .table_name(Alias::new("w"))
                .to_owned(),
        )
        .cte(
            CommonTableExpression::new()
                .query(audit)
                .table_name(Alias::new("audit"))
                .to_owned(),
        )
        .to_owned();
    Ok(build(&aggregate(rows).with(with)))
}

/// The shared state is at `versions`, compared in one InitPlan on
/// `svc.cache_version`: with `raise`, a mismatch fails the statement with
/// `TS412` ([`StoreError::Stale`]); without, the guarded read returns no row
/// and an empty answer is checked again by the caller (cheaper for
/// PostgreSQL than calling the raising function on every read).
fn current(versions: Versions, raise: bool) -> Expr {
    let version = |name: &str| Expr::col(Alias::new(name));
    let same = version("auth")
        .eq(versions.auth)
        .and(version("catalog").eq(versions.catalog))
        .and(version("settings").eq(versions.settings));
    let check = Query::select()
        .expr(if raise {
            Func::cust(Alias::new("svc.cache_current")).arg(same).into()
        } else {
            same
        })
        .from((Alias::new("svc"), Alias::new("cache_version")))
        .to_owned();
    Expr::SubQuery(None, Box::new(check.into()))
}

/// A read's rows: `select` of the rows matching `predicate` (checked against
/// the context's versions), in `sort` order, at most `limit` from `offset`.
/// `LIMIT` and `OFFSET` are written as numbers (checked integers, not input
/// text): bound, they keep PostgreSQL from costing a reusable plan, so it
/// plans the statement afresh on every execution.
struct Rows<'q, 'a> {
    select: &'q [Output<'a>],
    predicate: &'q Predicate<'a>,
    sort: &'q [(&'a Column, bool)],
    masks: &'q [Output<'a>],
    limit: u64,
    offset: u64,
}

impl Rows<'_, '_> {
    fn of<'q, 'a>(read: &'q Read<'a>) -> Rows<'q, 'a> {
        match read {
            Read::List(query) => Rows {
                select: &query.select,
                predicate: &query.predicate,
                sort: &query.sort,
                masks: &query.masks,
                limit: u64::from(query.limit),
                offset: query.offset,
            },
            Read::One { select, predicate } => Rows {
                select,
                predicate,
                sort: &[],
                masks: &[],
                limit: 1,
                offset: 0,
            },
        }
    }

    /// The statement, its columns read as [`Cell`]s, or, with `json`, as
    /// the text of `{ data, meta }` built by PostgreSQL, with the total.
    fn sql(
        &self,
        table: &Table,
        context: &Context,
        json: bool,
    ) -> (String, sea_orm::sea_query::Values) {
        let sql = Sql {
            table,
            context,
            rel: Rel::Alias("r"),
            masks: self.masks,
        };
        let condition = sql
            .predicate(self.predicate)
            .and(current(context.versions, json));
        let mut rows = if json {
            sql.outputs(self.select)
        } else {
            sql.cells(self.select)
        };
        rows.from_as(table_ref(table), Alias::new("r"))
            .and_where(condition.clone());
        for (column, descending) in self.sort {
            rows.order_by_expr(
                sql.shown(column),
                if *descending { Order::Desc } else { Order::Asc },
            );
        }
        let (limit, offset) = (self.limit, self.offset);
        let mut out = SqlWriterValues::new("$", true);
        // Writing to a string cannot fail.
        if !json {
            PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
            let _ = write!(out, " LIMIT {limit} OFFSET {offset}");
            return out.into_parts();
        }
        let count = Query::select()
            .expr(Expr::cust("count(*)"))
            .from_as(table_ref(table), Alias::new("r"))
            .and_where(condition)
            .to_owned();
        let _ = write!(
            out,
            "SELECT json_build_object('data', coalesce(json_agg(\"x\"), '[]'::json), 'meta', json_build_object('limit', {limit}, 'offset', {offset}, 'total', ("
        );
        PostgresQueryBuilder.prepare_select_statement(&count, &mut out);
        let _ = out.write_str(")))::text AS \"body\" FROM (");
        PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
        let _ = write!(out, " LIMIT {limit} OFFSET {offset}) AS \"x\"");
        out.into_parts()
    }

    /// `"name":` of each answer column, and how each is read.
    fn layout(&self) -> (Vec<String>, Vec<Cell>) {
        self.select
            .iter()
            .map(|output| {
                let mut key = String::with_capacity(output.column.name.len() + 3);
                write_string(&mut key, &output.column.name);
                key.push(':');
                (key, Cell::of(output.column))
            })
            .unzip()
    }
}

#[async_trait]
impl DataStore for PgStore {
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

    async fn system_timezone(&self) -> Result<(Option<String>, i64), StoreError> {
        let (settings, version) = self.versioned_settings().await?;
        Ok((settings.system_timezone().map(str::to_owned), version))
    }

    async fn read(
        &self,
        table: &Table,
        read: &Read<'_>,
        context: &Context,
    ) -> Result<Option<String>, StoreError> {
        let rows = Rows::of(read);
        if let Read::List(query) = read
            && query.count
        {
            return self.body(&self.db, rows.sql(table, context, true)).await;
        }
        let (sql, values) = rows.sql(table, context, false);
        let found = self.reads.rows(&sql, values).await.map_err(|e| {
            map_err(sea_orm::DbErr::Query(sea_orm::RuntimeErr::SqlxError(
                Arc::new(e),
            )))
        })?;
        if found.is_empty() && self.read_versions().await? != context.versions {
            return Err(StoreError::Stale);
        }
        let (keys, cells) = rows.layout();
        let mut out = String::with_capacity(64 + found.len() * 32 * keys.len().max(1));
        let list = matches!(read, Read::List(_));
        if list {
            out.push_str("{\"data\":[");
        } else if found.is_empty() {
            return Ok(None);
        }
        for (i, row) in found.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_object(&mut out, row, &keys, &cells)?;
        }
        if list {
            // Writing to a string cannot fail.
            let _ = write!(
                out,
                "],\"meta\":{{\"limit\":{},\"offset\":{}}}}}",
                rows.limit, rows.offset
            );
        }
        Ok(Some(out))
    }

    async fn write(
        &self,
        table: &Table,
        writes: &[Write<'_>],
        context: &Context,
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut statements = writes
            .iter()
            .map(|w| write_sql(table, w, context))
            .collect::<Result<Vec<_>, _>>()?;
        if statements.len() == 1
            && let Some(statement) = statements.pop()
        {
            return Ok(vec![self.body(&self.db, statement).await?]);
        }
        let txn = self.db.begin().await.map_err(map_err)?;
        let mut out = Vec::with_capacity(statements.len());
        for statement in statements {
            out.push(self.body(&txn, statement).await?);
        }
        txn.commit().await.map_err(map_err)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use data::ListQuery;
    use serde_json::json;

    use super::*;

    fn column(name: &str, sql_type: &str, kind: Kind) -> Column {
        Column {
            name: name.into(),
            sql_type: sql_type.into(),
            kind,
            nullable: true,
            has_default: false,
            writable: true,
        }
    }

    fn table() -> Table {
        Table {
            resource_id: kernel::new_id(),
            schema: "app".into(),
            name: "notes".into(),
            exposed_methods: vec!["GET".into()],
            columns: vec![
                column("id", "bigint", Kind::Integer),
                column("owner_id", "uuid", Kind::Uuid),
                column("title", "text", Kind::Text),
                column("at", "timestamp with time zone", Kind::TimestampTz),
            ],
            key: vec![0],
            check_messages: BTreeMap::new(),
            scopes: Vec::new(),
            version: 1,
        }
    }

    #[test]
    fn values_are_bound_and_names_quoted() {
        let table = table();
        let hostile = "x'); DROP TABLE app.notes; --";
        let filter = Filter::parse(
            &json!({ "or": [ { "title": { "like": hostile } }, { "owner_id": { "eq": "$USER.id" } },
                { "at": { "eq": "$PERIOD.today" } }, { "title": { "eq": "$USER.email" } } ] }),
            "filter",
        )
        .unwrap();
        let context = Context {
            user_id: kernel::new_id(),
            now: Utc.with_ymd_and_hms(2026, 3, 10, 20, 0, 0).unwrap(),
            zone: chrono_tz::Tz::Pacific__Auckland,
            versions: Versions::default(),
        };
        let query = ListQuery {
            select: table
                .columns
                .iter()
                .map(|column| Output { column, mask: None })
                .collect(),
            predicate: Predicate::Own(&filter),
            sort: vec![(&table.columns[2], true)],
            masks: Vec::new(),
            limit: 10,
            offset: 0,
            count: true,
        };
        let (sql, values) = Rows::of(&Read::List(query)).sql(&table, &context, true);
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains(r#"FROM "app"."notes" AS "r""#), "{sql}");
        assert!(sql.contains(r#"CAST($"#), "{sql}");
        assert!(sql.contains(r#"FROM "svc"."users" AS "caller""#), "{sql}");
        assert!(sql.contains(r#"ORDER BY "r"."title" DESC"#), "{sql}");
        assert!(sql.contains("'total'"), "{sql}");
        let bound = format!("{values:?}");
        assert!(bound.contains("DROP TABLE"), "{bound}");
        // Auckland's day, as timestamptz bounds an index can use.
        assert!(bound.contains("2026-03-11T00:00:00+13:00"), "{bound}");
        assert!(bound.contains("2026-03-12T00:00:00+13:00"), "{bound}");
    }

    #[test]
    fn day_bounds_fit_the_column_type() {
        let at = Utc
            .with_ymd_and_hms(2026, 3, 10, 11, 0, 0)
            .unwrap()
            .with_timezone(&chrono_tz::Tz::Pacific__Auckland);
        assert_eq!(instant(&column("d", "date", Kind::Date), at), "2026-03-11");
        assert_eq!(
            instant(
                &column("t", "timestamp without time zone", Kind::Timestamp),
                at
            ),
            "2026-03-11 00:00:00"
        );
        assert_eq!(
            instant(
                &column("z", "timestamp with time zone", Kind::TimestampTz),
                at
            ),
            "2026-03-11T00:00:00+13:00"
        );
    }
}
