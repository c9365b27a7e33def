//! The read statements of the Data API: a list, a row or an aggregate,
//! as cells or as the JSON PostgreSQL builds, checked against the shared
//! state's versions in the same statement.

use std::fmt::Write as _;

use data::{AggregateQuery, Column, Context, Embed, ListQuery, Output, Predicate, Read, Table};
use kernel::Versions;
use sea_orm::sea_query::{
    Alias, Asterisk, Expr, ExprTrait, Func, Order, PostgresQueryBuilder, Query, QueryBuilder,
    SelectStatement, SqlWriterValues,
};

use super::answer::{ROW_JSON, ROWS_CLOSE, answer, open_rows};
use super::sql::{Rel, Sql, table_ref};
use crate::json_rows::{Cell, write_string};

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

/// The oldest transaction still running as of the statement's snapshot,
/// as a number: a replica's statement answers it beside its rows, so that
/// a read sent before the primary named the caller's marked transactions
/// is accepted only when every one of them is below it (ended as of the
/// rows read).
const SNAPSHOT_XMIN: &str = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint";

/// The column that holds [`SNAPSHOT_XMIN`] in a replica's answer.
pub(super) const XMIN_COLUMN: &str = "tessera:xmin";

/// `, <xmin> AS "tessera:xmin"` on a replica, nothing on the primary.
pub(super) fn xmin_column(on: On<'_>) -> String {
    match on {
        On::Primary => String::new(),
        On::Replica(_) => format!(", {SNAPSHOT_XMIN} AS \"{XMIN_COLUMN}\""),
    }
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
/// plans the statement afresh on every execution.
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
        if !json && matches!(on, On::Replica(_)) {
            // After the row's cells, which the layout reads alone.
            rows.expr(Expr::cust(SNAPSHOT_XMIN));
        }
        let (limit, offset) = (self.limit, self.offset);
        let mut out = SqlWriterValues::new("$", true);
        // PostgreSQL builds a row's values before OFFSET skips it: with
        // embeds, the page's rows are chosen first (`r.*`, in order), so
        // related rows are read, and counted against the ceiling, for the
        // page alone. The page is written first (its LIMIT and OFFSET as
        // numbers) and spliced in where the statement names [`PAGE`].
        let chosen_first = offset > 0 && !self.embeds.is_empty();
        let page = if chosen_first {
            let mut page = Query::select();
            page.column((Alias::new("r"), Asterisk))
                .from_as(table_ref(table), Alias::new("r"))
                .and_where(condition.clone());
            self.order(&sql, &mut page);
            PostgresQueryBuilder.prepare_select_statement(&page, &mut out);
            // Writing to a string cannot fail.
            let _ = write!(out, " LIMIT {limit} OFFSET {offset}{PAGE_END}");
            rows.from_as(Alias::new(PAGE), Alias::new("r"));
            String::new()
        } else {
            rows.from_as(table_ref(table), Alias::new("r"))
                .and_where(condition.clone());
            format!(" LIMIT {limit} OFFSET {offset}")
        };
        self.order(&sql, &mut rows);
        if !json {
            PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
            let _ = out.write_str(&page);
            return spliced(out, chosen_first);
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
        let _ = write!(
            out,
            " AS \"total\"{} FROM {}(",
            xmin_column(on),
            open_rows(ROW_JSON)
        );
        PostgresQueryBuilder.prepare_select_statement(&rows, &mut out);
        let _ = write!(out, "{page}){ROWS_CLOSE}");
        spliced(out, chosen_first)
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

/// The relation a statement names for a page chosen first.
const PAGE: &str = "tessera:page";
/// What ends the text of a page chosen first, at the head of the statement.
const PAGE_END: char = '\u{1}';

/// The statement of `out`, with the page written at its head (when
/// `chosen_first`) put in place of the relation [`PAGE`]. Bound values
/// keep their numbers: the page's come first.
fn spliced(out: SqlWriterValues, chosen_first: bool) -> (String, sea_orm::sea_query::Values) {
    let (text, values) = out.into_parts();
    if !chosen_first {
        return (text, values);
    }
    let (page, statement) = text.split_once(PAGE_END).unwrap_or(("", text.as_str()));
    let statement = statement.replacen(&format!("\"{PAGE}\""), &format!("({page})"), 1);
    (statement, values)
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
    let _ = write!(out, "{} FROM {}(", xmin_column(on), open_rows(ROW_JSON));
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
    use crate::data_store::sql::instant;
    use data::Kind;
    use kernel::filter::Filter;
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
            hooks: Vec::new(),
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
