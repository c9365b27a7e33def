//! Database errors as the store's errors: constraint names choose the
//! field, an unreachable database is unavailable, PostgreSQL's own
//! refusals keep their code.

use std::sync::Arc;

use kernel::StoreError;
use sea_orm::{DbErr, RuntimeErr, SqlErr};

/// Maps a database error to the store's error; constraint names choose the field.
pub(crate) fn map_err(err: DbErr) -> StoreError {
    match err.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(detail)) => {
            let field = if detail.contains("users_email_key") {
                Some("email")
            } else if detail.contains("roles_name_key") {
                Some("name")
            } else if detail.contains("resources_table_key") {
                Some("table")
            } else if detail.contains("_slug_key") {
                Some("slug")
            } else {
                None
            };
            return StoreError::Conflict {
                field,
                message: "already taken".into(),
            };
        }
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => {
            return StoreError::Conflict {
                field: None,
                message: "refers to a record that does not exist".into(),
            };
        }
        _ => {}
    }
    if let Some(pg) = pg_error(&err) {
        match pg.code() {
            // query_canceled: the statement timeout (a cancel request is
            // sent by nothing else of this service).
            "57014" => return StoreError::QueryTimeout,
            "23514" => {
                return StoreError::CheckViolation {
                    constraint: pg.constraint().unwrap_or_default().to_owned(),
                };
            }
            "23502" => {
                return StoreError::NotNullViolation {
                    column: pg.column().unwrap_or_default().to_owned(),
                };
            }
            // Raised by the service tables' guards (the last administrator, built-in roles).
            "TS409" => {
                return StoreError::Conflict {
                    field: None,
                    message: pg.message().to_owned().into(),
                };
            }
            // Raised by a service table's check (an email template that would not render).
            "TS400" => {
                return StoreError::Invalid(kernel::FieldError::new(
                    pg.column().unwrap_or_default().to_owned(),
                    pg.message().to_owned(),
                ));
            }
            // A deadlock or a serialization failure between two writers.
            "40P01" | "40001" => {
                return StoreError::Conflict {
                    field: None,
                    message: "conflicted with a concurrent change; try again".into(),
                };
            }
            // lock_not_available: a change (a snapshot, a schema change)
            // waited its lock_timeout for a lock another session holds.
            "55P03" => {
                return StoreError::Conflict {
                    field: None,
                    message: "waited too long for a lock another change holds; try again".into(),
                };
            }
            // An upsert naming one row twice.
            "21000" => {
                return StoreError::Invalid(kernel::FieldError::new(
                    "data",
                    "names the same row twice",
                ));
            }
            // Raised by svc.cache_current: a read was planned on stale cached state.
            "TS412" => return StoreError::Stale,
            // Raised by svc.answer_piece and svc.answer_over: the answer passed data.max_answer_bytes.
            "TS413" => return StoreError::AnswerTooLarge,
            // Raised by svc.permit: a written row is outside the grants.
            "TS403" => return StoreError::RowDenied,
            // Data exceptions, a value the type's operators do not take, a generated column.
            code if code.starts_with("22")
                || matches!(code, "42883" | "42804" | "42846" | "428C9") =>
            {
                return StoreError::BadValue;
            }
            _ => {}
        }
    }
    match &err {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => StoreError::Unavailable(err.to_string()),
        DbErr::Query(RuntimeErr::SqlxError(e)) | DbErr::Exec(RuntimeErr::SqlxError(e))
            if is_unavailable(e) =>
        {
            StoreError::Unavailable(err.to_string())
        }
        _ => StoreError::Internal(err.to_string()),
    }
}

/// [`map_err`] for an error of the driver itself.
pub(crate) fn map_sqlx(err: sea_orm::sqlx::Error) -> StoreError {
    map_err(DbErr::Query(RuntimeErr::SqlxError(Arc::new(err))))
}

/// PostgreSQL's own error behind a database error, when there is one.
pub(crate) fn pg_error(err: &DbErr) -> Option<&sea_orm::sqlx::postgres::PgDatabaseError> {
    match err {
        DbErr::Query(RuntimeErr::SqlxError(e)) | DbErr::Exec(RuntimeErr::SqlxError(e)) => {
            match e.as_ref() {
                sea_orm::sqlx::Error::Database(db) => db.try_downcast_ref(),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether a driver error means the database cannot be reached (rather than a bug).
fn is_unavailable(err: &sea_orm::sqlx::Error) -> bool {
    use sea_orm::sqlx::Error;
    match err {
        Error::Io(_)
        | Error::Tls(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed
        | Error::Protocol(_) => true,
        // Connection exceptions (08), shutdown (57P0x), missing database (3D000).
        Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08") || code.starts_with("57P") || code == "3D000"
        }),
        _ => false,
    }
}
