//! Whole answers built by PostgreSQL under the ceiling of API.md 17:
//! each row's JSON beside the answer's running size, the array closed
//! with the row that would pass it failing the statement, and the bytes
//! of embedded arrays counted once.

use data::Embed;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, Query, SelectStatement};

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
pub(super) fn nests_many(embed: &Embed<'_>) -> bool {
    embed.many || embed.embeds.iter().any(nests_many)
}

/// The bytes of the values in a row of `embed` (relation `rows`) that
/// were counted as they were built: its embeds holding related rows.
pub(super) fn counted_inside(embed: &Embed<'_>, rows: &str) -> Expr {
    let mut counted = Expr::val(0i64);
    for nested in embed.embeds.iter().filter(|e| nests_many(e)) {
        let value = Expr::col((Alias::new(rows), Alias::new(nested.alias)));
        let length =
            Func::cust(Alias::new("octet_length")).arg(Func::cast_as(value, Alias::new("text")));
        counted = counted.add(Func::coalesce([length.into(), Expr::val(0i64)]));
    }
    counted
}
