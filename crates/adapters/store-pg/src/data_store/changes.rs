//! The rows of realtime events as one subscriber's view shows them: the list
//! route's columns, masks and conditions applied to the logged row images
//! (`json_populate_record` of the table's row type) instead of the table.

use std::fmt::Write as _;

use data::{Context, ListQuery, Table};
use kernel::sql::quote_ident;
use sea_orm::sea_query::{
    Alias, Expr, ExprTrait, Func, PostgresQueryBuilder, QueryBuilder, SqlWriter, SqlWriterValues,
};

use super::reads::{On, current};
use super::sql::{Rel, Sql};

/// `SELECT event, new, body` for the events `ids`: each after-image (`new`)
/// and before-image the view reaches, as compact JSON built by PostgreSQL.
/// A stale version fails the statement ([`kernel::StoreError::Stale`]).
pub(crate) fn changes_sql(
    table: &Table,
    query: &ListQuery<'_>,
    context: &Context,
    ids: &[i64],
    on: On<'_>,
) -> (String, sea_orm::sea_query::Values) {
    let sql = Sql {
        table,
        context,
        rel: Rel::Alias("r"),
        masks: &query.masks,
    };
    let row_type = format!(
        "NULL::{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let mut out = SqlWriterValues::new("$", true);
    for (i, side) in ["new", "old"].into_iter().enumerate() {
        let mut image = sql.outputs(&query.select);
        image
            .from_function(
                Func::cust(Alias::new("json_populate_record"))
                    .arg(Expr::cust(row_type.clone()))
                    .arg(Expr::col((Alias::new("e"), Alias::new(side)))),
                Alias::new("r"),
            )
            .and_where(
                sql.predicate(&query.predicate)
                    .and(current(context.versions, true, on)),
            );
        // Writing to a string cannot fail.
        if i > 0 {
            let _ = out.write_str(" UNION ALL ");
        }
        let _ = write!(
            out,
            "SELECT \"e\".\"id\" AS \"event\", {} AS \"new\", row_to_json(\"tessera:x\")::text AS \"body\" \
             FROM svc.realtime_events AS \"e\" CROSS JOIN LATERAL (",
            i == 0
        );
        PostgresQueryBuilder.prepare_select_statement(&image, &mut out);
        let _ = out.write_str(") AS \"tessera:x\" WHERE \"e\".\"id\" = ANY(");
        out.push_param(ids.to_vec().into(), &PostgresQueryBuilder);
        let _ = write!(out, ") AND \"e\".\"{side}\" IS NOT NULL");
    }
    out.into_parts()
}
