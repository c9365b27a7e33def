//! Calls of database functions (API.md 18): the registered function with
//! its invokers, kept with the catalog, and the call: one statement that
//! checks the versions and the function's definition it was planned on,
//! sets the caller's settings and applies the function (a read-only call
//! is that statement alone; a volatile one runs it in a transaction with
//! its audit entry).

use data::{Callable, FunctionCall};
use kernel::StoreError;
use kernel::function::{FunctionSignature, SIGNATURE_SQL};
use kernel::sql::quote_ident;
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Value};
use serde_json::Value as Json;
use uuid::Uuid;

use std::sync::Arc;

use super::catalog::FUNCTIONS_MAX;
use crate::query::{Begin, Commit, Query};
use crate::{PgStore, map_err, pg_error, rows, stmt, write_audit};

/// The longest exception message a call answers.
const RAISED_MESSAGE_MAX: usize = 1000;

/// A registered function with its description now and its invokers.
const CALLABLE_SQL: &str = "SELECT f.id, f.schema_name, f.function_name, f.exposed_methods, \
     ARRAY(SELECT g.role_id FROM svc.grants g WHERE g.function_id = f.id) AS invokers, \
     (SELECT {SIGNATURE} FROM pg_proc p \
       WHERE p.oid = to_regproc(format('%I.%I', f.schema_name, f.function_name)) \
         AND p.prokind = 'f') AS signature, \
     (SELECT p.oid::text || '/' || p.xmin::text FROM pg_proc p \
       WHERE p.oid = to_regproc(format('%I.%I', f.schema_name, f.function_name))) AS revision \
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
    revision: Option<String>,
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
/// (from `$1`), answering one text column `answer`, the JSON of its result
/// (`json`, not `jsonb`: building `jsonb` costs PostgreSQL twice the time),
/// or NULL when that is longer than `data.max_answer_bytes`, so that an
/// answer over the ceiling never leaves the database. Before the function
/// runs (its subquery reads the row that did), the statement checks the
/// versions and the function's revision it was planned on (else `TS412`)
/// and sets the caller's settings for the transaction, read-only when the
/// function only reads (`OFFSET 0` keeps the planner from pulling the
/// call's subquery up beside them, where it could run first). The values after the arguments: the ceiling, the
/// three versions, the schema, the name, the revision, the user, the roles.
fn call_sql(call: &FunctionCall<'_>) -> String {
    /// The call's rows, by a name no result column takes (a column named
    /// as the alias would be read in place of the whole row).
    const ROW: &str = "\"tessera:r\"";
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
        format!(
            "SELECT CASE WHEN ({applied}) IS NULL THEN 'null' ELSE 'null' END AS answer WHERE s.ok OFFSET 0"
        )
    } else if returns.set {
        format!(
            "SELECT coalesce(json_agg({ROW}), '[]')::text AS answer FROM {applied} AS {ROW} WHERE s.ok OFFSET 0"
        )
    } else {
        format!(
            "SELECT coalesce(to_json({ROW}), 'null')::text AS answer FROM {applied} AS {ROW} WHERE s.ok OFFSET 0"
        )
    };
    let n = call.arguments.len();
    let p = |i: usize| format!("${}", n + i);
    let read_only = if call.signature.volatility.reads_only() {
        ", set_config('transaction_read_only', 'on', true) AS ro"
    } else {
        ""
    };
    format!(
        "SELECT CASE WHEN octet_length(c.answer) <= {ceiling}::bigint THEN c.answer END AS answer \
         FROM (SELECT svc.cache_current(v.auth = {auth}::bigint AND v.catalog = {catalog}::bigint \
                 AND v.settings = {settings}::bigint AND (SELECT p.oid::text || '/' || p.xmin::text \
                 FROM pg_proc p WHERE p.oid = to_regproc(format('%I.%I', {schema}::text, {name}::text))) \
                 IS NOT DISTINCT FROM {revision}::text) AS ok, \
               set_config('tessera.user_id', {user}, true) AS u, \
               set_config('tessera.role_ids', {roles}, true) AS g{read_only} \
               FROM svc.cache_version v OFFSET 0) AS s \
         CROSS JOIN LATERAL ({answer}) AS c",
        ceiling = p(1),
        auth = p(2),
        catalog = p(3),
        settings = p(4),
        schema = p(5),
        name = p(6),
        revision = p(7),
        user = p(8),
        roles = p(9),
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
        if !(code.starts_with("23") || code == "57014" || code == "TS412") {
            return StoreError::FunctionFailed(format!("{code}: {}", pg.message()));
        }
    }
    match map_err(err) {
        StoreError::Internal(text) => StoreError::FunctionFailed(text),
        other => other,
    }
}

impl PgStore {
    /// The registered function `schema.name`, as the catalog of now keeps
    /// it (read on its first call under this catalog, or when `fresh`).
    pub(super) async fn callable_named(
        &self,
        schema: &str,
        name: &str,
        fresh: bool,
    ) -> Result<Option<Arc<Callable>>, StoreError> {
        let catalog = self.catalog().await?;
        let key = (schema.to_owned(), name.to_owned());
        let known = catalog
            .functions
            .read()
            .ok()
            .and_then(|f| f.get(&key).cloned());
        if let Some(known) = known.filter(|_| !fresh) {
            return Ok(Some(known));
        }
        let sql = CALLABLE_SQL.replace("{SIGNATURE}", SIGNATURE_SQL);
        let Some(row) = self
            .db
            .fetch_optional(stmt(&sql, [schema.into(), name.into()]))
            .await?
        else {
            return Ok(None);
        };
        let r = rows::row::<CallableRow>(&row)?;
        let callable = Arc::new(Callable {
            id: r.id,
            schema: r.schema_name,
            name: r.function_name,
            signature: r.signature.as_ref().and_then(FunctionSignature::from_json),
            exposed_methods: r.exposed_methods,
            invokers: r.invokers,
            version: catalog.version,
            revision: r.revision.unwrap_or_default(),
        });
        if let Ok(mut functions) = catalog.functions.write() {
            if functions.len() >= FUNCTIONS_MAX {
                functions.clear();
            }
            functions.insert(key, callable.clone());
        }
        Ok(Some(callable))
    }

    /// Forgets how `call`'s function was described: its statement found
    /// the state it was planned on changed (the function may have been
    /// replaced in place, which moves no version).
    async fn forget_callable(&self, call: &FunctionCall<'_>) {
        if let Ok(catalog) = self.catalog().await
            && let Ok(mut functions) = catalog.functions.write()
        {
            functions.remove(&(call.schema.to_owned(), call.name.to_owned()));
        }
    }

    pub(super) async fn call_function(
        &self,
        call: &FunctionCall<'_>,
    ) -> Result<String, StoreError> {
        let answered = self.call_once(call).await;
        if let Err(StoreError::Stale) = answered {
            self.forget_callable(call).await;
        }
        answered
    }

    /// The call's statement: alone when the function only reads, else in a
    /// transaction with the call's audit entry.
    async fn call_once(&self, call: &FunctionCall<'_>) -> Result<String, StoreError> {
        let role_ids = serde_json::to_string(call.role_ids).unwrap_or_else(|_| "[]".into());
        let mut values: Vec<Value> = call
            .arguments
            .iter()
            .map(|(_, _, value)| Value::from((*value).clone()))
            .collect();
        values.extend([
            i64::try_from(call.max_answer_bytes)
                .unwrap_or(i64::MAX)
                .into(),
            call.versions.auth.into(),
            call.versions.catalog.into(),
            call.versions.settings.into(),
            call.schema.into(),
            call.name.into(),
            call.revision.into(),
            call.user_id.to_string().into(),
            role_ids.into(),
        ]);
        let statement = stmt(&call_sql(call), values);
        let Some(audit) = call.audit.clone() else {
            let answered = self.db.query_one_raw(statement).await;
            return self.answer_of(call, answered).await;
        };
        let txn = self.db.open_txn().await?;
        let answered = txn.query_one_raw(statement).await;
        if answered.is_err() {
            drop(txn);
        } else {
            let answer = self.answer_of(call, answered).await?;
            write_audit(&txn, audit, self.now()).await?;
            txn.commit_txn().await?;
            return Ok(answer);
        }
        self.answer_of(call, answered).await
    }

    /// The answer of a call's statement, or its refusal.
    async fn answer_of(
        &self,
        call: &FunctionCall<'_>,
        answered: Result<Option<sea_orm::QueryResult>, DbErr>,
    ) -> Result<String, StoreError> {
        let row = match answered {
            Ok(row) => row.ok_or_else(|| StoreError::Internal("a call answered no row".into()))?,
            Err(err) if pg_error(&err).is_some_and(|pg| pg.code().starts_with("22")) => {
                return Err(self
                    .argument_refused(call)
                    .await
                    .unwrap_or_else(|| call_error(err)));
            }
            Err(err) => return Err(call_error(err)),
        };
        rows::column::<Option<String>>(&row, "answer")?.ok_or(StoreError::AnswerTooLarge)
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
