//! The one statement of a DataView read, built with the Data API's
//! expressions: the source's rows under the caller's grants, grouped (plain
//! columns and time buckets cut in the caller's zone), the view grants'
//! filters, the view's order and limit, then the request's filter, order and
//! page; PostgreSQL writes the JSON.

use std::fmt::Write as _;

use data::{Context, Kind};
use sea_orm::sea_query::{
    Alias, Asterisk, Expr, ExprTrait, Func, Order, PostgresQueryBuilder, Query, QueryBuilder,
    SqlWriterValues, Value as SqlValue, Values,
};
use serde_json::{Value, json};
use views::query::{Computed, ViewQuery};

use super::answer::{ROW_JSON, ROWS_CLOSE, answer, open_rows};
use super::reads::{On, current, xmin_column};
use super::sql::{Rel, Sql, table_ref};

/// The statement of `query` and its bound values.
pub(crate) fn view_sql(query: &ViewQuery<'_>, context: &Context, on: On<'_>) -> (String, Values) {
    let zone = context.zone.name();
    let source = Sql {
        table: query.source,
        context,
        rel: Rel::Alias("r"),
        masks: &query.masks,
    };
    let mut grouped = Query::select();
    let mut groups = Vec::new();
    for (i, (column, value)) in query.shape.columns.iter().zip(&query.values).enumerate() {
        if matches!(value, Computed::Group(_) | Computed::Bucket(..)) {
            // By position: a bucket's bound zone would not compare equal.
            groups.push(Expr::cust((i + 1).to_string()));
        }
        grouped.expr_as(computed(&source, value, zone), Alias::new(&column.name));
    }
    grouped
        .from_as(table_ref(query.source), Alias::new("r"))
        .and_where(
            source
                .predicate(&query.rows)
                .and(current(context.versions, true, on)),
        )
        .add_group_by(groups);
    let over = |alias: &'static str| Sql {
        table: query.shape,
        context,
        rel: Rel::Alias(alias),
        masks: &[],
    };
    let g = over("g");
    let mut view_rows = Query::select();
    view_rows
        .column(Asterisk)
        .from_subquery(grouped, Alias::new("g"))
        .and_where(g.predicate(&query.granted));
    for (column, descending) in &query.view_sort {
        view_rows.order_by_expr(g.col(column), order(*descending));
    }
    let v = over("v");
    let condition = v.predicate(&query.filter);
    let mut page = Query::select();
    for column in &query.shape.columns {
        let value = match column.kind {
            Kind::TimestampTz => Func::cust(Alias::new("svc.iso_in_zone"))
                .arg(v.col(column))
                .arg(zone)
                .into(),
            _ => v.col(column),
        };
        page.expr_as(value, Alias::new(&column.name));
    }
    page.from(Alias::new("v")).and_where(condition.clone());
    for (column, descending) in &query.sort {
        page.order_by_expr(v.col(column), order(*descending));
    }
    let mut out = SqlWriterValues::new("$", true);
    // Writing to a string cannot fail.
    let _ = out.write_str("WITH \"v\" AS (");
    PostgresQueryBuilder.prepare_select_statement(&view_rows, &mut out);
    // Limits are checked numbers, written as such (as the Data API does).
    if let Some(limit) = query.view_limit {
        let _ = write!(out, " LIMIT {limit}");
    }
    let body = answer(context.max_answer_bytes);
    let _ = write!(out, ") SELECT {body} AS \"body\", ");
    if query.count {
        let count = Query::select()
            .expr(Expr::cust("count(*)"))
            .from(Alias::new("v"))
            .and_where(condition)
            .to_owned();
        let _ = out.write_str("(");
        PostgresQueryBuilder.prepare_select_statement(&count, &mut out);
        let _ = out.write_str(") AS \"total\"");
    } else {
        let _ = out.write_str("NULL::bigint AS \"total\"");
    }
    let _ = write!(out, "{} FROM {}(", xmin_column(on), open_rows(ROW_JSON));
    PostgresQueryBuilder.prepare_select_statement(&page, &mut out);
    let _ = write!(
        out,
        " LIMIT {} OFFSET {}){ROWS_CLOSE}",
        query.limit, query.offset
    );
    out.into_parts()
}

fn order(descending: bool) -> Order {
    if descending { Order::Desc } else { Order::Asc }
}

/// One output column over the source's rows `r`.
fn computed(source: &Sql<'_>, value: &Computed<'_>, zone: &str) -> Expr {
    match value {
        Computed::Group(output) => source.output(output),
        Computed::Bucket(bucket, output) => {
            let value = source.output(output);
            // A fixed word, never input text.
            let unit = bucket.as_str();
            match output.column.kind {
                Kind::TimestampTz => Expr::cust_with_exprs(
                    format!("date_trunc('{unit}', $1 AT TIME ZONE $2) AT TIME ZONE $3"),
                    [value, Expr::val(zone), Expr::val(zone)],
                ),
                Kind::Date => Expr::cust_with_exprs(
                    format!("date_trunc('{unit}', $1::timestamp)::date"),
                    [value],
                ),
                _ => Expr::cust_with_exprs(format!("date_trunc('{unit}', $1)"), [value]),
            }
        }
        Computed::Count(None) => Expr::cust("count(*)"),
        Computed::Count(Some(output)) => Func::count(source.output(output)).into(),
        Computed::Agg(agg, output) => Func::cust(Alias::new(agg.as_str()))
            .arg(source.output(output))
            .into(),
    }
}

/// The bound values as JSON, for a preview.
pub(crate) fn params_json(values: &Values) -> Vec<Value> {
    values
        .0
        .iter()
        .map(|value| match value {
            SqlValue::Bool(Some(b)) => json!(b),
            SqlValue::Int(Some(n)) => json!(n),
            SqlValue::BigInt(Some(n)) => json!(n),
            SqlValue::Double(Some(n)) => json!(n),
            SqlValue::String(Some(s)) => json!(s),
            SqlValue::Uuid(Some(u)) => json!(u),
            other => json!(format!("{other:?}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::{TimeZone, Utc};
    use data::{Column, Output, Predicate, Table};
    use kernel::Versions;
    use kernel::filter::Filter;
    use views::definition::{Agg, Bucket, Definition};

    use super::*;

    fn column(name: &str, sql_type: &str, kind: Kind) -> Column {
        Column::plain(name, sql_type, kind, true)
    }

    #[test]
    fn names_are_quoted_values_bound_and_groups_taken_by_position() {
        let source = Table {
            resource_id: kernel::new_id(),
            schema: "app".into(),
            name: "sales".into(),
            exposed_methods: Vec::new(),
            columns: vec![
                column("id", "bigint", Kind::Integer),
                column("at", "timestamp with time zone", Kind::TimestampTz),
                column("team", "text", Kind::Text),
                column("amount", "numeric", Kind::Number),
            ],
            key: vec![0],
            check_messages: BTreeMap::new(),
            foreign_keys: Vec::new(),
            unique_keys: Vec::new(),
            hooks: Vec::new(),
            scopes: Vec::new(),
            version: 1,
        };
        let body = json!({ "source": "app.sales", "columns": [
            { "name": "day", "bucket": "day", "column": "at" },
            { "name": "team", "column": "team" },
            { "name": "total", "agg": "sum", "column": "amount" } ] });
        let definition = Definition::parse(body.as_object().unwrap()).unwrap();
        let shape = definition.shape(&source).unwrap();
        let hostile = Filter::parse(
            &json!({ "team": { "eq": "x'); DROP TABLE app.sales; --" } }),
            "filter",
        )
        .unwrap();
        let shown = |i: usize| Output {
            column: &source.columns[i],
            mask: None,
        };
        let query = ViewQuery {
            source: &source,
            shape: &shape,
            values: vec![
                Computed::Bucket(Bucket::Day, shown(1)),
                Computed::Group(shown(2)),
                Computed::Agg(Agg::Sum, shown(3)),
            ],
            rows: Predicate::Own(&hostile),
            masks: Vec::new(),
            granted: Predicate::All(Vec::new()),
            view_sort: vec![(&shape.columns[0], true)],
            view_limit: Some(10),
            filter: Predicate::All(Vec::new()),
            sort: vec![(&shape.columns[0], false)],
            limit: 5,
            offset: 2,
            count: true,
        };
        let context = Context {
            user_id: kernel::new_id(),
            now: Utc.with_ymd_and_hms(2026, 4, 5, 12, 0, 0).unwrap(),
            zone: chrono_tz::Tz::Pacific__Auckland,
            versions: Versions::default(),
            max_answer_bytes: 33_554_432,
        };
        let (sql, values) = view_sql(&query, &context, On::Primary);
        assert!(!sql.contains("DROP") && !sql.contains("Auckland"), "{sql}");
        assert!(
            sql.contains(r#"date_trunc('day', "r"."at" AT TIME ZONE $1) AT TIME ZONE $2 AS "day""#),
            "{sql}"
        );
        assert!(sql.contains(r#"sum("r"."amount") AS "total""#), "{sql}");
        assert!(sql.contains("GROUP BY 1, 2"), "{sql}");
        assert!(
            sql.contains(r#"ORDER BY "g"."day" DESC LIMIT 10)"#),
            "{sql}"
        );
        assert!(sql.contains(r#"svc.iso_in_zone("v"."day", $"#), "{sql}");
        assert!(sql.contains("LIMIT 5 OFFSET 2"), "{sql}");
        assert!(sql.contains(r#"(SELECT count(*) FROM "v""#), "{sql}");
        let bound = params_json(&values);
        assert!(bound.contains(&json!("Pacific/Auckland")), "{bound:?}");
        assert!(
            bound.contains(&json!("x'); DROP TABLE app.sales; --")),
            "{bound:?}"
        );
    }
}
