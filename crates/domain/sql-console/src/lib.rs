//! The SQL console (`POST /admin/api/sql`): one statement of an
//! administrator's, with positional parameters bound, optionally in a READ
//! ONLY transaction, under `sql_console.timeout_ms`, with a cap on the rows
//! answered; every call that reaches the database is audited with its text.

mod error;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use audit::AuditEvent;
use permissions::Principal;
use serde_json::{Value, json};
use settings::SettingsService;

pub use error::{SqlConsoleError, SqlFailure};

/// Most rows an answer carries; the rest are counted, not sent.
pub const ROW_CAP: usize = 1000;
/// Most bytes of row JSON an answer carries; past it the rows are cut.
pub const BYTE_CAP: usize = 8 * 1024 * 1024;
/// Longest statement text taken.
pub const QUERY_MAX_CHARS: usize = 100_000;

/// One call of the console.
#[derive(Debug, Clone)]
pub struct SqlRequest {
    /// The statement's text.
    pub query: String,
    /// Values of `$1`, `$2`, ... in order.
    pub params: Vec<Value>,
    /// Run in a READ ONLY transaction.
    pub read_only: bool,
}

/// A statement as the store runs it.
#[derive(Debug)]
pub struct SqlRun<'a> {
    /// The statement's text.
    pub query: &'a str,
    /// Values of the positional parameters.
    pub params: &'a [Value],
    /// Run in a READ ONLY transaction.
    pub read_only: bool,
    /// `statement_timeout` in milliseconds.
    pub timeout_ms: u64,
    /// Most rows answered.
    pub row_cap: usize,
    /// Most bytes of row JSON answered.
    pub byte_cap: usize,
    /// The audit entry: written with the statement when it succeeds, alone
    /// (with the error added to its details) when PostgreSQL refuses it.
    pub audit: AuditEvent,
}

/// A result column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlColumn {
    /// The column's name as PostgreSQL reports it (names may repeat).
    pub name: String,
    /// PostgreSQL's name of its type, such as `int4`, `text[]`.
    pub type_name: String,
}

/// What a statement answered.
#[derive(Debug, Clone)]
pub struct SqlOutput {
    /// The result columns, in order (none for a command without rows).
    pub columns: Vec<SqlColumn>,
    /// JSON text of an array of rows, each an array in the order of `columns`.
    pub rows: String,
    /// Rows the statement returned (all of them, not only those sent) or, for
    /// a command without rows, the rows it changed.
    pub row_count: u64,
    /// Some rows were left out (past [`ROW_CAP`] or [`BYTE_CAP`]).
    pub truncated: bool,
}

/// An answer with the time the statement took.
#[derive(Debug, Clone)]
pub struct SqlAnswer {
    /// The statement's output.
    pub output: SqlOutput,
    /// Milliseconds from sending the statement to its last row.
    pub duration_ms: f64,
}

/// Runs a statement.
#[async_trait]
pub trait SqlStore: Send + Sync + 'static {
    /// Runs `run` in its own transaction and writes its audit entry.
    async fn execute(&self, run: SqlRun<'_>) -> Result<SqlOutput, SqlFailure>;
}

/// The console's rules.
#[derive(Clone)]
pub struct SqlConsole {
    store: Arc<dyn SqlStore>,
    settings: SettingsService,
}

impl SqlConsole {
    /// A console over `store`.
    pub fn new(store: Arc<dyn SqlStore>, settings: SettingsService) -> Self {
        Self { store, settings }
    }

    /// Runs `request` for `caller` (an administrator: the route checks it).
    /// A token is refused unless `sql_console.allow_api_tokens` is on.
    pub async fn run(
        &self,
        caller: &Principal,
        request: SqlRequest,
        ip: Option<String>,
    ) -> Result<SqlAnswer, SqlConsoleError> {
        let settings = self.settings.current().await?;
        if !caller.is_session() && !settings.sql_console_allow_api_tokens() {
            return Err(SqlConsoleError::PermissionDenied);
        }
        check(&request)?;
        let audit = AuditEvent::new(caller.actor(), "sql.execute", None, ip).with_details(json!({
            "query": request.query,
            "params": request.params.len(),
            "readOnly": request.read_only,
        }));
        let started = Instant::now();
        let output = self
            .store
            .execute(SqlRun {
                query: &request.query,
                params: &request.params,
                read_only: request.read_only,
                timeout_ms: settings.sql_console_timeout_ms(),
                row_cap: ROW_CAP,
                byte_cap: BYTE_CAP,
                audit,
            })
            .await?;
        Ok(SqlAnswer {
            output,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }
}

/// Refuses what never needs the database: an empty or oversized statement.
fn check(request: &SqlRequest) -> Result<(), SqlConsoleError> {
    if request.query.trim().is_empty() {
        return Err(SqlConsoleError::invalid("query", "must not be empty"));
    }
    if request.query.chars().count() > QUERY_MAX_CHARS {
        return Err(SqlConsoleError::invalid(
            "query",
            format!("must be at most {QUERY_MAX_CHARS} characters"),
        ));
    }
    if request.query.contains('\0') {
        return Err(SqlConsoleError::invalid(
            "query",
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(query: &str) -> SqlRequest {
        SqlRequest {
            query: query.to_owned(),
            params: Vec::new(),
            read_only: false,
        }
    }

    #[test]
    fn empty_oversized_and_nul_statements_never_reach_the_database() {
        for query in ["", "  \n", "SELECT '\0'", &"x".repeat(QUERY_MAX_CHARS + 1)] {
            let refused = check(&request(query)).unwrap_err();
            assert!(
                matches!(&refused, SqlConsoleError::Invalid { field, .. } if field == "query"),
                "{query:.20}: {refused:?}"
            );
        }
        check(&request("SELECT 1")).unwrap();
    }
}
