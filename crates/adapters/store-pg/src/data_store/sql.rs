//! The read statements of the Data API, and the expressions reads and
//! writes share, built with sea-query from checked names and bound values.

use std::fmt::Write as _;

use data::{
    AggregateQuery, Column, Context, EMBED_ROWS_MAX, Embed, Kind, ListQuery, Output, Predicate,
    Read, Table, user_column,
};
use kernel::Versions;
use kernel::filter::{Filter, Op, Operand};
use permissions::zone::Period;
use sea_orm::sea_query::{
    Alias, Asterisk, Cond, Expr, ExprTrait, Func, Order, PostgresQueryBuilder, Query, QueryBuilder,
    SelectStatement, SqlWriterValues,
};
use serde_json::Value;

use crate::json_rows::{Cell, write_string};

/// Which relation column references point at.
#[derive(Clone, Copy)]
pub(super) enum Rel<'a> {
    /// An alias, such as `r` or the CTE `w`.
    Alias(&'static str),
    /// The schema-qualified table (UPDATE and DELETE targets).
    Table(&'a Table),
}

/// Turns the Data API's parsed queries into sea-query expressions.
pub(super) struct Sql<'a> {
    pub(super) table: &'a Table,
    pub(super) context: &'a Context,
    pub(super) rel: Rel<'a>,
    /// Masked columns, for the caller's own filter and sort.
    pub(super) masks: &'a [Output<'a>],
}

impl Sql<'_> {
    pub(super) fn col(&self, column: &Column) -> Expr {
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
    pub(super) fn cast(column: &Column, text: String) -> Expr {
        Func::cast_as(Expr::val(text), Alias::new(&column.sql_type)).into()
    }

    pub(super) fn predicate(&self, predicate: &Predicate<'_>) -> Expr {
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

    pub(super) fn join(&self, parts: impl Iterator<Item = Expr>, all: bool) -> Expr {
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
    pub(super) fn filter(&self, filter: &Filter, masked: bool) -> Expr {
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
    pub(super) fn shown(&self, column: &Column) -> Expr {
        match self.masks.iter().find(|m| m.column.name == column.name) {
            Some(mask) => self.output(mask),
            None => self.col(column),
        }
    }

    pub(super) fn condition(&self, col: Expr, column: &Column, op: Op, operand: &Operand) -> Expr {
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
            // The expression of a `search` index (API.md 12), so it is used.
            (Op::Search, _) => Expr::cust_with_exprs(
                "to_tsvector('simple', $1) @@ websearch_to_tsquery('simple', $2)",
                [col, self.operand(column, operand)],
            ),
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

    pub(super) fn operand(&self, column: &Column, operand: &Operand) -> Expr {
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
    pub(super) fn output(&self, output: &Output<'_>) -> Expr {
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
    pub(super) fn cells(&self, outputs: &[Output<'_>]) -> SelectStatement {
        let mut select = Query::select();
        for output in outputs {
            select.expr(self.cell(output));
        }
        select
    }

    /// An answer column as its [`Cell`] reads it.
    fn cell(&self, output: &Output<'_>) -> Expr {
        let value = self.output(output);
        match Cell::of(output.column) {
            Cell::Json => Func::cast_as(
                Func::cust(Alias::new("to_json")).arg(value),
                Alias::new("text"),
            )
            .into(),
            _ => value,
        }
    }

    /// An embed as the binary path reads it: a to-one embed is one
    /// `record` (NULL when no row is found) of its columns as [`Cell`]s
    /// read them, then of its own embeds the same way, which PostgreSQL
    /// sends in binary like the listed columns; a to-many one is its JSON
    /// array as text. `depth` is the embed's, as for [`Sql::embed`].
    pub(super) fn embed_cell(&self, embed: &Embed<'_>, depth: usize) -> Expr {
        if embed.many {
            return Func::cast_as(self.embed(embed, depth), Alias::new("text")).into();
        }
        let inner = self.embedded(embed, depth);
        let fields: Vec<Expr> = embed
            .select
            .iter()
            .map(|output| inner.cell(output))
            .chain(embed.embeds.iter().map(|e| inner.embed_cell(e, depth + 1)))
            .collect();
        let template = (1..=fields.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut select = Query::select();
        select.expr(Expr::cust_with_exprs(format!("ROW({template})"), fields));
        self.related(&inner, embed, &mut select);
        select.limit(1);
        Expr::SubQuery(None, Box::new(select.into()))
    }

    /// Expressions over the rows of `embed` at `depth`, named `e<depth>`.
    fn embedded<'s>(&'s self, embed: &'s Embed<'_>, depth: usize) -> Sql<'s> {
        Sql {
            table: embed.table,
            context: self.context,
            rel: Rel::Alias(EMBED_ALIASES[depth.min(EMBED_ALIASES.len() - 1)]),
            masks: &[],
        }
    }

    /// `FROM` the related table `WHERE` its rows link to this relation's
    /// and the caller may read them.
    fn related(&self, inner: &Sql<'_>, embed: &Embed<'_>, select: &mut SelectStatement) {
        select
            .from_as(table_ref(embed.table), Alias::new(inner.rel_alias()))
            .and_where(inner.output(&embed.child).eq(self.output(&embed.parent)))
            .and_where(inner.predicate(&embed.predicate));
    }

    /// The JSON of `embed` in each row of this relation: one object or
    /// null, or an array. `depth` is the embed's (1 inside the listed rows),
    /// which names its relation `e<depth>` and its rows `j<depth>`.
    pub(super) fn embed(&self, embed: &Embed<'_>, depth: usize) -> Expr {
        let inner = self.embedded(embed, depth);
        let rows = format!("tessera:j{depth}");
        let mut select = Query::select();
        for output in &embed.select {
            select.expr_as(inner.output(output), Alias::new(&output.column.name));
        }
        for nested in &embed.embeds {
            select.expr_as(inner.embed(nested, depth + 1), Alias::new(nested.alias));
        }
        let object = if embed.select.is_empty() && embed.embeds.is_empty() {
            select.expr(Expr::cust("1"));
            "'{}'::json".to_owned()
        } else {
            format!("row_to_json(\"{rows}\")")
        };
        self.related(&inner, embed, &mut select);
        // Each value holding related rows adds its own bytes to the
        // answer's count as it is built (`svc.answer_piece`, API.md 17):
        // its length less the values inside it counted already, so every
        // byte counts once and nesting cannot make a statement hold more
        // than the ceiling.
        let counted = counted_inside(embed, &rows);
        let cap = self.context.max_answer_bytes;
        let answer = if embed.many {
            for key in embed.table.key_columns() {
                select.order_by_expr(inner.col(key), Order::Asc);
            }
            select.limit(u64::from(EMBED_ROWS_MAX));
            Expr::cust_with_exprs(
                format!(
                    "svc.answer_piece(coalesce(json_agg({object}), '[]'::json), \
                     coalesce(sum($1), 0)::bigint, {cap})"
                ),
                [counted],
            )
        } else if nests_many(embed) {
            select.limit(1);
            Expr::cust_with_exprs(format!("svc.answer_piece({object}, $1, {cap})"), [counted])
        } else {
            select.limit(1);
            Expr::cust(object)
        };
        let wrapped = Query::select()
            .expr(answer)
            .from_subquery(select, Alias::new(rows))
            .to_owned();
        Expr::SubQuery(None, Box::new(wrapped.into()))
    }

    fn rel_alias(&self) -> &'static str {
        match self.rel {
            Rel::Alias(alias) => alias,
            Rel::Table(_) => "r",
        }
    }

    /// `SELECT <outputs> FROM <rel>`, aliased `x` by the caller.
    pub(super) fn outputs(&self, outputs: &[Output<'_>]) -> SelectStatement {
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

pub(super) fn table_ref(table: &Table) -> (Alias, Alias) {
    (Alias::new(&table.schema), Alias::new(&table.name))
}

pub(super) fn build(
    statement: &impl sea_orm::sea_query::QueryStatementBuilder,
) -> (String, sea_orm::sea_query::Values) {
    statement.build_any(&PostgresQueryBuilder)
}

/// The relation of the listed rows, then of each embed depth.
const EMBED_ALIASES: [&str; 5] = ["r", "e1", "e2", "e3", "e4"];

/// The JSON text of a row of relation `"tessera:x"`.
pub(super) const ROW_JSON: &str = "row_to_json(\"tessera:x\")::text";

/// The bytes of the answer through each row of `"tessera:rows"`: the
/// rows' JSON and a comma each, summed as the rows arrive.
const RUNNING_BYTES: &str = "sum(octet_length(\"tessera:t\") + 1) OVER (ROWS UNBOUNDED PRECEDING)";

/// A whole answer of relation `"tessera:rows"` ([`open_rows`] or
/// [`measured_rows`]): a compact JSON array of its rows, NULL when there
/// are none. The row that would take the array past `cap` bytes fails the
/// statement (TS413) as it is added, so PostgreSQL never holds more than
/// the ceiling of it (API.md 17).
pub(super) fn answer(cap: u64) -> String {
    format!(
        "'[' || string_agg(CASE WHEN \"tessera:n\" < {cap} THEN \"tessera:t\" \
         ELSE svc.answer_over() END, ',') || ']'"
    )
}

/// Opens `"tessera:rows"`: the relation written next, aliased
/// `"tessera:x"` by [`ROWS_CLOSE`], each row as its JSON `text` and the
/// answer's running size. `OFFSET 0` keeps each row's JSON built once.
pub(super) fn open_rows(text: &str) -> String {
    format!(
        "(SELECT \"tessera:t\", {RUNNING_BYTES} AS \"tessera:n\" \
         FROM (SELECT {text} AS \"tessera:t\" FROM "
    )
}

/// Closes what [`open_rows`] opened.
pub(super) const ROWS_CLOSE: &str =
    " AS \"tessera:x\" OFFSET 0) AS \"tessera:y\") AS \"tessera:rows\"";

/// `"tessera:rows"` of [`open_rows`] over `rows`, for a statement built
/// whole by sea-query.
pub(super) fn measured_rows(rows: SelectStatement, text: &'static str) -> (SelectStatement, Alias) {
    let each = Query::select()
        .expr_as(Expr::cust(text), Alias::new("tessera:t"))
        .from_subquery(rows, Alias::new("tessera:x"))
        .offset(0)
        .to_owned();
    let measured = Query::select()
        .column(Alias::new("tessera:t"))
        .expr_as(Expr::cust(RUNNING_BYTES), Alias::new("tessera:n"))
        .from_subquery(each, Alias::new("tessera:y"))
        .to_owned();
    (measured, Alias::new("tessera:rows"))
}

/// Whether `embed` holds to-many related rows at some depth (counted
/// arrays).
fn nests_many(embed: &Embed<'_>) -> bool {
    embed.many || embed.embeds.iter().any(nests_many)
}

/// The bytes of the values in a row of `embed` (relation `rows`) that
/// were counted as they were built: its embeds holding related rows.
fn counted_inside(embed: &Embed<'_>, rows: &str) -> Expr {
    let mut counted = Expr::val(0i64);
    for nested in embed.embeds.iter().filter(|e| nests_many(e)) {
        let value = Expr::col((Alias::new(rows), Alias::new(nested.alias)));
        let length =
            Func::cust(Alias::new("octet_length")).arg(Func::cast_as(value, Alias::new("text")));
        counted = counted.add(Func::coalesce([length.into(), Expr::val(0i64)]));
    }
    counted
}

/// Where a statement runs, for its check of the shared state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum On<'g> {
    /// The primary: the versions alone.
    Primary,
    /// A read replica: the versions, and these transactions (an `xid8`
    /// array as text, `{1,2}`) ended as of the statement's snapshot (below
    /// its `xmin`: on a standby the snapshot lists no running transaction,
    /// only its horizon, so visibility cannot be asked of it directly); a
    /// mismatch always fails the statement (the primary answers instead).
    Replica(Option<&'g str>),
}

/// The shared state is at `versions`, compared in one InitPlan on
/// `svc.cache_version`: with `raise`, a mismatch fails the statement with
/// `TS412` ([`StoreError::Stale`]); without, the guarded read returns no row
/// and an empty answer is checked again by the caller (cheaper for
/// PostgreSQL than calling the raising function on every read). On a
/// replica, see [`On::Replica`].
pub(super) fn current(versions: Versions, raise: bool, on: On<'_>) -> Expr {
    let version = |name: &str| Expr::col(Alias::new(name));
    let mut same = version("auth")
        .eq(versions.auth)
        .and(version("catalog").eq(versions.catalog))
        .and(version("settings").eq(versions.settings));
    if let On::Replica(Some(xids)) = on {
        same = same.and(Expr::cust_with_values(
            "coalesce((SELECT bool_and(\"x\" < pg_snapshot_xmin(pg_current_snapshot())) \
             FROM unnest($1::text::xid8[]) AS \"x\"), true)",
            [xids],
        ));
    }
    let check = Query::select()
        .expr(if raise || matches!(on, On::Replica(_)) {
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
/// plans the statement afresh on every execution. The one exception is a
/// page with embeds past an offset, chosen in a subquery of its own.
pub(super) struct Rows<'q, 'a> {
    select: &'q [Output<'a>],
    embeds: &'q [Embed<'a>],
    predicate: &'q Predicate<'a>,
    sort: &'q [(&'a Column, bool)],
    masks: &'q [Output<'a>],
    limit: u64,
    offset: u64,
    /// The JSON statement also counts every matching row (`count=exact`).
    count: bool,
}

impl Rows<'_, '_> {
    pub(super) fn of<'q, 'a>(read: &'q Read<'a>) -> Rows<'q, 'a> {
        match read {
            Read::List(query) => Rows::of_list(query),
            Read::One {
                select,
                embeds,
                predicate,
            } => Rows {
                select,
                embeds,
                predicate,
                sort: &[],
                masks: &[],
                limit: 1,
                offset: 0,
                count: false,
            },
            Read::Aggregate(query) => Rows {
                select: &[],
                embeds: &[],
                predicate: &query.predicate,
                sort: &[],
                masks: &query.masks,
                limit: u64::from(query.limit),
                offset: query.offset,
                count: query.count,
            },
        }
    }

    /// A list read's rows.
    pub(super) fn of_list<'q, 'a>(query: &'q ListQuery<'a>) -> Rows<'q, 'a> {
        Rows {
            select: &query.select,
            embeds: &query.embeds,
            predicate: &query.predicate,
            sort: &query.sort,
            masks: &query.masks,
            limit: u64::from(query.limit),
            offset: query.offset,
            count: query.count,
        }
    }

    /// The statement with every column as PostgreSQL's text (CSV out),
    /// failing when the versions are stale; every row from the offset
    /// when `all`, else at most the limit.
    pub(super) fn text_sql(
        &self,
        table: &Table,
        context: &Context,
        all: bool,
        on: On<'_>,
    ) -> (String, sea_orm::sea_query::Values) {
        let sql = self.over(table, context);
        let mut rows = Query::select();
        for output in self.select {
            rows.expr(Func::cast_as(sql.output(output), Alias::new("text")));
        }
        if self.select.is_empty() {
            rows.expr(Expr::cust("''"));
        }
        rows.from_as(table_ref(table), Alias::new("r")).and_where(
            sql.predicate(self.predicate)
                .and(current(context.versions, true, on)),
        );
        self.order(&sql, &mut rows);
        let mut out = SqlWriterValues::new("$", true);
        PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
        // Writing to a string cannot fail.
        let _ = match all {
            true => write!(out, " OFFSET {}", self.offset),
            false => write!(out, " LIMIT {} OFFSET {}", self.limit, self.offset),
        };
        out.into_parts()
    }

    /// Expressions over the listed rows, `r`, read through the masks.
    fn over<'s>(&'s self, table: &'s Table, context: &'s Context) -> Sql<'s> {
        Sql {
            table,
            context,
            rel: Rel::Alias("r"),
            masks: self.masks,
        }
    }

    fn order(&self, sql: &Sql<'_>, rows: &mut SelectStatement) {
        for (column, descending) in self.sort {
            rows.order_by_expr(
                sql.shown(column),
                if *descending { Order::Desc } else { Order::Asc },
            );
        }
    }

    /// The statement, its columns read as [`Cell`]s, or, with `json`, the
    /// JSON array of the rows built by PostgreSQL (`body`) with their
    /// total (`total`, counted only when the read asks for it).
    pub(super) fn sql(
        &self,
        table: &Table,
        context: &Context,
        json: bool,
        on: On<'_>,
    ) -> (String, sea_orm::sea_query::Values) {
        let sql = self.over(table, context);
        let condition = sql
            .predicate(self.predicate)
            .and(current(context.versions, json, on));
        let mut rows = if !json {
            sql.cells(self.select)
        } else if self.select.is_empty() {
            // No column of the row (the embeds alone, or `{}`), without the
            // stand-in `outputs` adds for a statement that needs one.
            Query::select()
        } else {
            sql.outputs(self.select)
        };
        for embed in self.embeds {
            if json {
                rows.expr_as(sql.embed(embed, 1), Alias::new(embed.alias));
            } else {
                rows.expr(sql.embed_cell(embed, 1));
            }
        }
        if !json && self.select.is_empty() && self.embeds.is_empty() {
            // A row with no column the caller may read: `{}`.
            rows.expr(Expr::cust("1"));
        }
        let (limit, offset) = (self.limit, self.offset);
        // PostgreSQL builds a row's values before OFFSET skips it: with
        // embeds, the page's rows are chosen first (`r.*`, in order), so
        // related rows are read, and counted against the ceiling, for the
        // page alone.
        let page = if offset > 0 && !self.embeds.is_empty() {
            let mut page = Query::select();
            page.column((Alias::new("r"), Asterisk))
                .from_as(table_ref(table), Alias::new("r"))
                .and_where(condition.clone());
            self.order(&sql, &mut page);
            page.limit(limit).offset(offset);
            rows.from_subquery(page, Alias::new("r"));
            String::new()
        } else {
            rows.from_as(table_ref(table), Alias::new("r"))
                .and_where(condition.clone());
            format!(" LIMIT {limit} OFFSET {offset}")
        };
        self.order(&sql, &mut rows);
        let mut out = SqlWriterValues::new("$", true);
        // Writing to a string cannot fail.
        if !json {
            PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
            let _ = out.write_str(&page);
            return out.into_parts();
        }
        let body = answer(context.max_answer_bytes);
        let _ = write!(out, "SELECT {body} AS \"body\", ");
        if self.count {
            let count = Query::select()
                .expr(Expr::cust("count(*)"))
                .from_as(table_ref(table), Alias::new("r"))
                .and_where(condition)
                .to_owned();
            let _ = out.write_str("(");
            PostgresQueryBuilder.prepare_select_statement(&count, &mut out);
            let _ = out.write_str(")");
        } else {
            let _ = out.write_str("NULL::bigint");
        }
        let _ = write!(out, " AS \"total\" FROM {}(", open_rows(ROW_JSON));
        PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
        let _ = write!(out, "{page}){ROWS_CLOSE}");
        out.into_parts()
    }

    /// `"name":` of each column of the statement without `json`, and how
    /// each is read: a to-one embed is [`Cell::Object`] followed by the
    /// entries of its record's fields.
    pub(super) fn layout(&self) -> (Vec<String>, Vec<Cell>) {
        let mut layout = Vec::new();
        entries(self.select, self.embeds, &mut layout);
        layout.into_iter().unzip()
    }
}

/// The layout entries of `select` then `embeds`, as [`Rows::layout`].
fn entries(select: &[Output<'_>], embeds: &[Embed<'_>], layout: &mut Vec<(String, Cell)>) {
    let key = |name: &str| {
        let mut key = String::with_capacity(name.len() + 3);
        write_string(&mut key, name);
        key.push(':');
        key
    };
    for output in select {
        layout.push((key(&output.column.name), Cell::of(output.column)));
    }
    for embed in embeds {
        if embed.many {
            layout.push((key(embed.alias), Cell::Json));
            continue;
        }
        let at = layout.len();
        layout.push((key(embed.alias), Cell::Object(0)));
        entries(&embed.select, &embed.embeds, layout);
        layout[at].1 = Cell::Object(layout.len() - at - 1);
    }
}

/// An aggregate read: one row per group, as a JSON array built by
/// PostgreSQL (`body`), with the number of groups (`total`) when counted.
pub(super) fn aggregate_sql(
    table: &Table,
    query: &AggregateQuery<'_>,
    context: &Context,
    on: On<'_>,
) -> (String, sea_orm::sea_query::Values) {
    let sql = Sql {
        table,
        context,
        rel: Rel::Alias("r"),
        masks: &query.masks,
    };
    let condition = sql
        .predicate(&query.predicate)
        .and(current(context.versions, true, on));
    let mut groups = Query::select();
    for output in &query.group_by {
        groups.expr_as(sql.output(output), Alias::new(&output.column.name));
    }
    for aggregate in &query.aggregates {
        let argument = match &aggregate.column {
            Some(output) => sql.output(output),
            None => Expr::cust("*"),
        };
        groups.expr_as(
            Func::cust(Alias::new(aggregate.function.sql())).arg(argument),
            Alias::new(aggregate.alias),
        );
    }
    groups
        .from_as(table_ref(table), Alias::new("r"))
        .and_where(condition.clone());
    let positions: Vec<Expr> = (1..=query.group_by.len())
        .map(|i| Expr::cust(i.to_string()))
        .collect();
    groups.add_group_by(positions.clone());
    for (name, descending) in &query.sort {
        groups.order_by_expr(
            Expr::col(Alias::new(*name)),
            if *descending { Order::Desc } else { Order::Asc },
        );
    }
    let mut out = SqlWriterValues::new("$", true);
    // Writing to a string cannot fail.
    let body = answer(context.max_answer_bytes);
    let _ = write!(out, "SELECT {body} AS \"body\"");
    if query.count && query.group_by.is_empty() {
        let _ = out.write_str(", 1::bigint AS \"total\"");
    } else if query.count {
        let mut counted = Query::select();
        counted.expr(Expr::cust("1"));
        for output in &query.group_by {
            counted.expr(sql.output(output));
        }
        counted
            .from_as(table_ref(table), Alias::new("r"))
            .and_where(condition)
            .add_group_by((2..=query.group_by.len() + 1).map(|i| Expr::cust(i.to_string())));
        let _ = out.write_str(", (SELECT count(*) FROM (");
        PostgresQueryBuilder.prepare_select_statement(&counted, &mut out);
        let _ = out.write_str(") AS \"g\") AS \"total\"");
    }
    let _ = write!(out, " FROM {}(", open_rows(ROW_JSON));
    PostgresQueryBuilder.prepare_select_statement(&groups, &mut out);
    let _ = write!(
        out,
        " LIMIT {} OFFSET {}){ROWS_CLOSE}",
        query.limit, query.offset
    );
    out.into_parts()
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use data::ListQuery;
    use serde_json::json;

    use super::*;
    use std::collections::BTreeMap;

    fn column(name: &str, sql_type: &str, kind: Kind) -> Column {
        Column::plain(name, sql_type, kind, true)
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
            foreign_keys: Vec::new(),
            unique_keys: Vec::new(),
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
            max_answer_bytes: 33_554_432,
        };
        let query = ListQuery {
            select: table
                .columns
                .iter()
                .map(|column| Output { column, mask: None })
                .collect(),
            embeds: Vec::new(),
            predicate: Predicate::Own(&filter),
            sort: vec![(&table.columns[2], true)],
            masks: Vec::new(),
            limit: 10,
            offset: 0,
            count: true,
        };
        let (sql, values) = Rows::of(&Read::List(query)).sql(&table, &context, true, On::Primary);
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains(r#"FROM "app"."notes" AS "r""#), "{sql}");
        assert!(sql.contains(r#"CAST($"#), "{sql}");
        assert!(sql.contains(r#"FROM "svc"."users" AS "caller""#), "{sql}");
        assert!(sql.contains(r#"ORDER BY "r"."title" DESC"#), "{sql}");
        assert!(sql.contains(r#") AS "total" FROM"#), "{sql}");
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

    /// Random filters over the table, with hostile strings: whatever the
    /// parser and the checks accept becomes SQL in which no input value
    /// appears (every value is bound) and every name is a quoted column of
    /// the table.
    mod fuzz {
        use chrono::{TimeZone, Utc};
        use data::{ListQuery, check_filter};
        use permissions::Access;
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::*;

        /// Marks every string the generator makes.
        const MARK: &str = "zq9";

        fn operand() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<i32>().prop_map(Value::from),
                "[a-z0-9 ';\"%_()-]{0,10}".prop_map(|s| Value::String(format!("{MARK}{s}"))),
                prop::sample::select(vec![
                    "$USER.id",
                    "$USER.email",
                    "$PERIOD.today",
                    "2026-03-10T00:00:00Z"
                ])
                .prop_map(|s| Value::String(s.to_owned())),
                prop::collection::vec(
                    "[a-z']{0,6}".prop_map(|s| json!(format!("{MARK}{s}"))),
                    1..4
                )
                .prop_map(Value::Array),
                any::<bool>().prop_map(Value::Bool),
            ]
        }

        fn filter() -> impl Strategy<Value = Value> {
            let condition = (
                prop::sample::select(vec!["id", "owner_id", "title", "at"]),
                prop::sample::select(vec![
                    "eq", "neq", "gt", "gte", "lt", "lte", "in", "nin", "like", "ilike", "isNull",
                ]),
                operand(),
            )
                .prop_map(|(column, op, value)| json!({ column: { op: value } }));
            condition.prop_recursive(4, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({ "and": v })),
                    prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({ "or": v })),
                    inner.prop_map(|f| json!({ "not": f })),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn values_never_reach_the_sql_text(raw in filter()) {
                let table = table();
                let Ok(filter) = Filter::parse(&raw, "filter") else { return Ok(()); };
                if check_filter(&table, &Access::All, &filter).is_err() {
                    return Ok(());
                }
                let context = Context {
                    user_id: kernel::new_id(),
                    now: Utc.with_ymd_and_hms(2026, 3, 10, 20, 0, 0).unwrap(),
                    zone: chrono_tz::Tz::Europe__Paris,
                    versions: Versions::default(),
                    max_answer_bytes: 33_554_432,
                };
                let query = ListQuery {
                    select: table.columns.iter().map(|column| Output { column, mask: None }).collect(),
                    embeds: Vec::new(),
                    predicate: Predicate::Own(&filter),
                    sort: Vec::new(),
                    masks: Vec::new(),
                    limit: 10,
                    offset: 0,
                    count: false,
                };
                let (sql, _) = Rows::of(&Read::List(query)).sql(&table, &context, false, On::Primary);
                prop_assert!(!sql.contains(MARK), "{}", sql);
                for quoted in sql.split('"').skip(1).step_by(2) {
                    prop_assert!(
                        ["app", "notes", "r", "svc", "users", "caller", "id", "owner_id", "title", "at", "email"]
                            .contains(&quoted) || quoted.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                        "{} in {}", quoted, sql
                    );
                }
            }
        }
    }
}
