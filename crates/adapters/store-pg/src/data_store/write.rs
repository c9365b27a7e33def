//! The statement of one Data API write.

use data::{Change, Column, Context, Output, Shown, Table, Write};
use kernel::StoreError;
use kernel::sql::quote_ident;
use sea_orm::sea_query::{
    Alias, CommonTableExpression, Expr, ExprTrait, Func, OnConflict, Order, Query, SelectStatement,
    WithClause,
};

use super::answer::{ROW_JSON, answer, measured_rows};
use super::reads::{On, current};
use super::sql::{Rel, Sql, build, table_ref};

/// The SQL of one write: a data-modifying CTE `w`, the audit entry when a row
/// changed, and the rows as JSON, each checked against the grants. With
/// `mark` (read replicas serve reads), the write's transaction is noted
/// for the user in `svc.write_marks` and answered in columns `mark_lsn`
/// and `mark_xid`.
pub(crate) fn write_sql(
    table: &Table,
    write: &Write<'_>,
    context: &Context,
    mark: bool,
) -> Result<(String, sea_orm::sea_query::Values), StoreError> {
    let change = change(table, write, context)?;
    let written = Sql {
        table,
        context,
        rel: Rel::Alias("w"),
        masks: &[],
    };
    let audit = audit(table, write, context, &written)?;
    let mut rows = shown(&written, &write.returning);
    // Planned on current state, or the statement fails and nothing is
    // written (the check gates the scan of `w`, before the change runs).
    rows.from(Alias::new("w"))
        .and_where(current(context.versions, true, On::Primary));
    let any_of = |filters: &Option<Vec<&kernel::filter::Filter>>| {
        filters
            .as_ref()
            .map(|list| written.join(list.iter().map(|f| written.filter(f, false)), false))
    };
    let check = match &write.change {
        // Rows inserted pass the create grants, rows updated the update grants.
        Change::Insert {
            upsert: Some(upsert),
            ..
        } if write.check.is_some() || upsert.check.is_some() => Some(
            Expr::case(
                Expr::col((Alias::new("w"), Alias::new(INSERTED))),
                any_of(&write.check).unwrap_or(Expr::cust("TRUE")),
            )
            .finally(any_of(&upsert.check).unwrap_or(Expr::cust("TRUE")))
            .into(),
        ),
        Change::Insert {
            upsert: Some(_), ..
        } => None,
        _ => any_of(&write.check),
    };
    if let Some(check) = check {
        rows.and_where(Expr::cust_with_exprs("svc.permit($1)", [check]));
    }
    if let Change::Insert {
        upsert: Some(upsert),
        ..
    } = &write.change
        && upsert.updates_only
    {
        rows.and_where(Expr::cust(format!(
            "svc.cache_current(NOT \"w\".{})",
            quote_ident(INSERTED)
        )));
    }
    if write.guard_admin_power
        && !matches!(write.change, Change::Delete { .. })
        && let Some(guard) = admin_power_guard(table)
    {
        rows.and_where(Expr::cust(format!("svc.permit({guard})")));
    }
    let mut with = WithClause::new()
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
    if mark {
        with.cte(
            CommonTableExpression::new()
                .query(write_mark(context)?)
                .table_name(Alias::new("mark"))
                .to_owned(),
        );
    }
    // A row shown by reach comes as one JSON column, `row`; an import
    // shows no row, only how many were written.
    let mut answer = if matches!(write.change, Change::InsertStaged { .. }) {
        Query::select()
            .expr_as(Expr::cust("count(*)::text"), Alias::new("body"))
            .from_subquery(rows, Alias::new("tessera:x"))
            .to_owned()
    } else {
        let text = match write.returning.reach {
            Some(_) => "\"tessera:x\".\"row\"::text",
            None => ROW_JSON,
        };
        let (measured, alias) = measured_rows(rows, text);
        Query::select()
            .expr_as(
                Expr::cust(answer(context.max_answer_bytes)),
                Alias::new("body"),
            )
            .from_subquery(measured, alias)
            .to_owned()
    };
    if mark {
        for column in ["mark_lsn", "mark_xid"] {
            answer.expr_as(
                Expr::cust(format!("(SELECT \"{column}\" FROM \"mark\")")),
                Alias::new(column),
            );
        }
    }
    Ok(build(&answer.with(with)))
}

/// Notes the writing transaction for the user (its id, the WAL position,
/// the connection's process) and returns the first two as numbers.
fn write_mark(context: &Context) -> Result<sea_orm::sea_query::InsertStatement, StoreError> {
    let names = |names: &[&str]| names.iter().map(|n| Alias::new(*n)).collect::<Vec<_>>();
    let mut insert = Query::insert();
    insert
        .into_table((Alias::new("svc"), Alias::new("write_marks")))
        .columns(names(&["user_id", "backend", "xid", "lsn", "at"]))
        .values([
            context.user_id.into(),
            Expr::cust("pg_backend_pid()"),
            Expr::cust("pg_current_xact_id()"),
            Expr::cust("pg_current_wal_insert_lsn()"),
            // The statement's time, not the transaction's start: a long
            // import's mark lives ten minutes from its last statement.
            Expr::cust("clock_timestamp()"),
        ])
        .map_err(|e| StoreError::Internal(e.to_string()))?
        .on_conflict(
            OnConflict::columns(names(&["user_id", "backend"]))
                .update_columns(names(&["xid", "lsn", "at"]))
                .to_owned(),
        )
        .returning(Query::returning().exprs([
            Expr::cust("(\"lsn\" - '0/0'::pg_lsn)::bigint AS \"mark_lsn\""),
            Expr::cust("\"xid\"::text::bigint AS \"mark_xid\""),
        ]));
    Ok(insert)
}

/// `SELECT` of each written row as the answer shows it: every column of
/// `shown` on a row its reach covers, the key columns alone elsewhere.
fn shown(written: &Sql<'_>, shown: &Shown<'_>) -> SelectStatement {
    let Some(reach) = &shown.reach else {
        return written.outputs(&shown.columns);
    };
    let object = |outputs: &[Output<'_>]| -> Expr {
        let fields = written.outputs(outputs);
        Expr::SubQuery(
            None,
            Box::new(
                Query::select()
                    .expr(Expr::cust("row_to_json(\"f\")"))
                    .from_subquery(fields, Alias::new("f"))
                    .to_owned()
                    .into(),
            ),
        )
    };
    let reached = written.join(reach.iter().map(|f| written.filter(f, false)), false);
    Query::select()
        .expr_as(
            Expr::case(reached, object(&shown.columns)).finally(object(&shown.keys)),
            Alias::new("row"),
        )
        .to_owned()
}

/// The column of an upsert's written rows that tells an insert (true)
/// from an update; a name no check or answer reads as a table column.
const INSERTED: &str = "tessera:inserted";

/// Rows that hold or give administrator power in a service table, as a
/// condition on a written row `w` that holds when the row does not:
/// a membership of a role with admin access, an administrator's account,
/// an email template (its links carry reset tokens, an administrator's too).
fn admin_power_guard(table: &Table) -> Option<&'static str> {
    match (table.schema.as_str(), table.name.as_str()) {
        (data::SERVICE_SCHEMA, "email_templates") => Some("false"),
        (data::SERVICE_SCHEMA, "role_members") => Some(
            "NOT EXISTS (SELECT 1 FROM svc.roles r \
             WHERE r.id = \"w\".\"role_id\" AND r.admin_access)",
        ),
        (data::SERVICE_SCHEMA, "users") => Some(
            "NOT EXISTS (SELECT 1 FROM svc.role_members m JOIN svc.roles r ON r.id = m.role_id \
             WHERE m.user_id = \"w\".\"id\" AND r.admin_access)",
        ),
        _ => None,
    }
}

/// The change itself, returning every column of the rows it wrote.
fn change(
    table: &Table,
    write: &Write<'_>,
    context: &Context,
) -> Result<sea_orm::sea_query::SubQueryStatement, StoreError> {
    let target = Sql {
        table,
        context,
        rel: Rel::Table(table),
        masks: &[],
    };
    let record_type = format!(
        "NULL::{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let all_columns = || table.columns.iter().map(|c| Alias::new(&c.name));
    Ok(match &write.change {
        // Rows that name no column take every default.
        Change::Insert { columns, rows, .. } if columns.is_empty() => Query::insert()
            .into_table(table_ref(table))
            .or_default_values_many(u32::try_from(rows.len()).unwrap_or(u32::MAX))
            .returning(Query::returning().columns(all_columns()))
            .to_owned()
            .into(),
        Change::Insert {
            columns,
            rows,
            upsert,
        } => {
            let json =
                serde_json::to_string(rows).map_err(|e| StoreError::Internal(e.to_string()))?;
            let mut insert = Query::insert();
            insert
                .into_table(table_ref(table))
                .columns(columns.iter().map(|c| Alias::new(&c.name)))
                .select_from(populated(&record_type, columns, json))
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            let Some(upsert) = upsert else {
                return Ok(insert
                    .returning(Query::returning().columns(all_columns()))
                    .to_owned()
                    .into());
            };
            let names = |columns: &[&Column]| -> Vec<Alias> {
                columns.iter().map(|c| Alias::new(&c.name)).collect()
            };
            let mut on_conflict = OnConflict::columns(names(&upsert.conflict));
            // Nothing to set: the key set to itself, so the row is answered.
            on_conflict.update_columns(names(if upsert.set.is_empty() {
                &upsert.conflict
            } else {
                &upsert.set
            }));
            // The existing row must be one the update grants reach.
            if let Some(filters) = &upsert.check {
                on_conflict.action_and_where(Expr::cust_with_exprs(
                    "svc.permit($1)",
                    [target.join(filters.iter().map(|f| target.filter(f, false)), false)],
                ));
            }
            let inserted = Expr::cust(format!("(xmax = 0) AS {}", quote_ident(INSERTED)));
            insert
                .on_conflict(on_conflict)
                .returning(
                    Query::returning().exprs(
                        table
                            .columns
                            .iter()
                            .map(|c| Expr::col(Alias::new(&c.name)))
                            .chain([inserted]),
                    ),
                )
                .to_owned()
                .into()
        }
        // A CSV import's staged text, in the order read: each value cast to
        // its column's type without the modifier (its input function), the
        // modifier then applied as the insert assigns it, so an over-long
        // value is refused as a JSON insert of strings (and `COPY`)
        // refuses it.
        Change::InsertStaged {
            columns,
            lines: (first, last),
        } => {
            if columns.is_empty() {
                return Err(StoreError::Internal("an import names no column".into()));
            }
            let mut staged = Query::select();
            for (i, column) in columns.iter().enumerate() {
                staged.expr(Expr::cust(format!(
                    "CAST(\"s\".{} AS {})",
                    super::import::staged_column(i),
                    column.input_type
                )));
            }
            staged
                .from_as(
                    (Alias::new("pg_temp"), Alias::new(super::import::STAGED)),
                    Alias::new("s"),
                )
                .and_where(Expr::col((Alias::new("s"), Alias::new("line"))).between(
                    i64::try_from(*first).unwrap_or(i64::MAX),
                    i64::try_from(*last).unwrap_or(i64::MAX),
                ))
                .order_by((Alias::new("s"), Alias::new("line")), Order::Asc);
            Query::insert()
                .into_table(table_ref(table))
                .columns(columns.iter().map(|c| Alias::new(&c.name)))
                .select_from(staged)
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
                        format!("($1).{}", quote_ident(&column.name)),
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
    })
}

/// `SELECT <columns> FROM json_populate_recordset(<record type>, <json>)`:
/// the rows of a JSON array of objects, each value read as its column's
/// type (with its modifier).
fn populated(record_type: &str, columns: &[&Column], json: String) -> SelectStatement {
    let source = Func::cust(Alias::new("json_populate_recordset"))
        .arg(Expr::cust(record_type.to_owned()))
        .arg(Func::cast_as(Expr::val(json), Alias::new("json")));
    let mut select = Query::select();
    for column in columns {
        select.expr(Expr::col((Alias::new("j"), Alias::new(&column.name))));
    }
    select.from_function(source, Alias::new("j"));
    select
}

/// The audit entry of the rows written (`w`), when there are any.
fn audit(
    table: &Table,
    write: &Write<'_>,
    context: &Context,
    written: &Sql<'_>,
) -> Result<sea_orm::sea_query::InsertStatement, StoreError> {
    let event = &write.audit;
    // An import's chunk is audited by its count and lines (in the event's
    // details): a million keys would make the log the import's main cost.
    if matches!(write.change, Change::InsertStaged { .. }) {
        let details = "CAST($1 AS jsonb) || jsonb_build_object('count', count(*))";
        return audit_insert(event, context, details, []);
    }
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
    let details = "CAST($1 AS jsonb) || jsonb_build_object('count', count(*), 'keys', jsonb_agg(jsonb_build_array($2)))";
    audit_insert(event, context, details, [key_list])
}

/// `INSERT INTO svc.audit_log` of `event` when `w` holds rows, its details
/// `details_sql` (`$1` the event's details, then `values`).
fn audit_insert<const N: usize>(
    event: &audit::AuditEvent,
    context: &Context,
    details_sql: &'static str,
    values: [Expr; N],
) -> Result<sea_orm::sea_query::InsertStatement, StoreError> {
    let details = std::iter::once(Expr::val(event.details.to_string())).chain(values);
    let audit_row = Query::select()
        .expr(Expr::val(kernel::new_id()))
        .expr(Expr::val(context.now))
        .expr(Expr::val(event.actor.kind.as_str()))
        .expr(Expr::val(event.actor.id))
        .expr(Expr::val(event.action))
        .expr(Expr::val(event.target.clone()))
        .expr(Expr::cust_with_exprs(details_sql, details))
        .expr(Expr::val(event.ip.clone()))
        .from(Alias::new("w"))
        .and_having(Expr::cust("count(*) > 0"))
        .to_owned();
    Query::insert()
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
        .map_err(|e| StoreError::Internal(e.to_string()))
        .map(|insert| insert.to_owned())
}
