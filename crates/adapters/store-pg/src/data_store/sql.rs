//! The expressions reads and writes share, built with sea-query from
//! checked names and bound values.

use data::{Column, Context, EMBED_ROWS_MAX, Embed, Kind, Output, Predicate, Table, user_column};
use kernel::filter::{Filter, Op, Operand};
use permissions::zone::Period;
use sea_orm::sea_query::{
    Alias, Cond, Expr, ExprTrait, Func, Order, PostgresQueryBuilder, Query, SelectStatement,
};
use serde_json::Value;

use super::answer::{counted_inside, nests_many};
use crate::json_rows::Cell;

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
pub(super) fn instant(column: &Column, at: chrono::DateTime<chrono_tz::Tz>) -> String {
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
