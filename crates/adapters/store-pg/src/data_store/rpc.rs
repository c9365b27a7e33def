//! Calls of database functions (API.md 18): the registered function read
//! afresh with its invokers, and the call in a transaction of its own that
//! first sets the caller's settings.

use data::{Callable, FunctionCall};
use kernel::StoreError;
use kernel::function::{FunctionSignature, SIGNATURE_SQL};
use kernel::sql::quote_ident;
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Value};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::query::{Begin, Commit, Query};
use crate::{PgStore, map_err, pg_error, rows, stmt, write_audit};

/// The longest exception message a call answers.
const RAISED_MESSAGE_MAX: usize = 1000;

/// A registered function with its description now and its invokers.
const CALLABLE_SQL: &str = "SELECT f.id, f.schema_name, f.function_name, f.exposed_methods, \
     ARRAY(SELECT g.role_id FROM svc.grants g WHERE g.function_id = f.id) AS invokers, \
     (SELECT {SIGNATURE} FROM pg_proc p \
       WHERE p.oid = to_regproc(format('%I.%I', f.schema_name, f.function_name)) \
         AND p.prokind = 'f') AS signature \
     FROM svc.functions f WHERE f.schema_name = $1 AND f.function_name = $2";

/// A row of [`CALLABLE_SQL`].
#[derive(FromQueryResult)]
struct CallableRow {
    id: Uuid,
    schema_name: String,
    function_name: String,
    exposed_methods: Vec<String>,
    invokers: Vec<Uuid>,
    signature: Option<Json>,
}

/// `$n` as a value of `data_type`, from the JSON bound there: JSON types
/// take it whole, arrays take its elements, others its text.
fn cast(n: usize, data_type: &str) -> String {
    match data_type {
        "jsonb" | "json" => format!("${n}::jsonb::{data_type}"),
        array if array.ends_with("[]") => {
            format!("ARRAY(SELECT jsonb_array_elements_text(${n}::jsonb))::{array}")
        }
        other => format!("(${n}::jsonb #>> '{{}}')::{other}"),
    }
}

/// The statement of `call`: the function applied to its arguments by name
/// (from `$1`), answering one text column `answer`, the JSON of its result,
/// or NULL when that is longer than `data.max_answer_bytes` (the last
/// parameter), so that an answer over the ceiling never leaves the
/// database.
fn call_sql(call: &FunctionCall<'_>) -> String {
    let arguments: Vec<String> = call
        .arguments
        .iter()
        .enumerate()
        .map(|(i, (name, data_type, _))| {
            format!("{} => {}", quote_ident(name), cast(i + 1, data_type))
        })
        .collect();
    let applied = format!(
        "{}.{}({})",
        quote_ident(call.schema),
        quote_ident(call.name),
        arguments.join(", ")
    );
    let returns = &call.signature.returns;
    let answer = if returns.is_void() {
        format!("SELECT CASE WHEN ({applied}) IS NULL THEN 'null' ELSE 'null' END AS answer")
    } else if returns.set {
        format!("SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]')::text AS answer FROM {applied} AS r")
    } else {
        format!("SELECT coalesce(to_jsonb(r), 'null')::text AS answer FROM {applied} AS r")
    };
    let ceiling = call.arguments.len() + 1;
    format!(
        "SELECT CASE WHEN octet_length(c.answer) <= ${ceiling}::bigint THEN c.answer END AS answer \
         FROM ({answer}) AS c"
    )
}

/// A failed call's error: an exception raised is the function's message;
/// the table rules and the timeout keep their codes; anything else names
/// no SQL (its text goes to the logs).
fn call_error(err: DbErr) -> StoreError {
    if let Some(pg) = pg_error(&err) {
        if pg.code() == "P0001" {
            return StoreError::FunctionRaised {
                message: pg.message().chars().take(RAISED_MESSAGE_MAX).collect(),
                code: pg
                    .hint()
                    .filter(|h| kernel::validate::is_code(h))
                    .map(str::to_owned),
            };
        }
        let code = pg.code();
        if !(code.starts_with("23") || code == "57014") {
            return StoreError::FunctionFailed(format!("{code}: {}", pg.message()));
        }
    }
    match map_err(err) {
        StoreError::Internal(text) => StoreError::FunctionFailed(text),
        other => other,
    }
}

impl PgStore {
    pub(super) async fn callable_named(
        &self,
        schema: &str,
        name: &str,
    ) -> Result<Option<Callable>, StoreError> {
        let sql = CALLABLE_SQL.replace("{SIGNATURE}", SIGNATURE_SQL);
        let Some(row) = self
            .db
            .fetch_optional(stmt(&sql, [schema.into(), name.into()]))
            .await?
        else {
            return Ok(None);
        };
        let r = rows::row::<CallableRow>(&row)?;
        Ok(Some(Callable {
            id: r.id,
            schema: r.schema_name,
            name: r.function_name,
            signature: r.signature.as_ref().and_then(FunctionSignature::from_json),
            exposed_methods: r.exposed_methods,
            invokers: r.invokers,
        }))
    }

    pub(super) async fn call_function(
        &self,
        call: &FunctionCall<'_>,
    ) -> Result<String, StoreError> {
        let reads_only = call.signature.volatility.reads_only();
        let role_ids = serde_json::to_string(call.role_ids).unwrap_or_else(|_| "[]".into());
        let txn = self.db.open_txn().await?;
        // Read-only may be set after the first statement (read-write may not).
        txn.run(stmt(
            "SELECT set_config('tessera.user_id', $1, true), set_config('tessera.role_ids', $2, true), \
             set_config('transaction_read_only', $3, true)",
            [
                call.user_id.to_string().into(),
                role_ids.into(),
                if reads_only { "on" } else { "off" }.into(),
            ],
        ))
        .await?;
        let mut values: Vec<Value> = call
            .arguments
            .iter()
            .map(|(_, _, value)| Value::from((*value).clone()))
            .collect();
        values.push(
            i64::try_from(call.max_answer_bytes)
                .unwrap_or(i64::MAX)
                .into(),
        );
        let answered = txn.query_one_raw(stmt(&call_sql(call), values)).await;
        let row = match answered {
            Ok(row) => row.ok_or_else(|| StoreError::Internal("a call answered no row".into()))?,
            Err(err) if pg_error(&err).is_some_and(|pg| pg.code().starts_with("22")) => {
                drop(txn);
                return Err(self
                    .argument_refused(call)
                    .await
                    .unwrap_or_else(|| call_error(err)));
            }
            Err(err) => return Err(call_error(err)),
        };
        let Some(answer) = rows::column::<Option<String>>(&row, "answer")? else {
            return Err(StoreError::AnswerTooLarge);
        };
        if let Some(event) = call.audit.clone() {
            write_audit(&txn, event, self.now()).await?;
        }
        txn.commit_txn().await?;
        Ok(answer)
    }

    /// After a data exception, the first argument whose value does not cast
    /// to its type, as an invalid field; `None` when each casts (the
    /// function itself failed).
    async fn argument_refused(&self, call: &FunctionCall<'_>) -> Option<StoreError> {
        for (name, data_type, value) in &call.arguments {
            let sql = format!("SELECT ({}) IS NULL AS unused", cast(1, data_type));
            let casts = self
                .db
                .query_one_raw(stmt(&sql, [Value::from((*value).clone())]))
                .await;
            if casts.is_err() {
                return Some(StoreError::Invalid(kernel::FieldError::new(
                    format!("data.{name}"),
                    format!("does not cast to {data_type}"),
                )));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_cast_from_their_json() {
        assert_eq!(cast(1, "integer"), "($1::jsonb #>> '{}')::integer");
        assert_eq!(cast(2, "jsonb"), "$2::jsonb::jsonb");
        assert_eq!(
            cast(3, "text[]"),
            "ARRAY(SELECT jsonb_array_elements_text($3::jsonb))::text[]"
        );
    }
}
