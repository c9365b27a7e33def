//! Reading the audit log, its filters checked.

use std::borrow::Cow;
use std::sync::Arc;

use kernel::{Code, ErrorCode, FieldError, StoreError};
use uuid::Uuid;

use crate::{AuditEntry, AuditQuery, AuditStore, Before};

/// Longest `action` filter, in characters.
pub const ACTION_MAX: usize = 100;

/// Why the audit log cannot be read as asked.
#[derive(Debug)]
pub enum AuditError {
    /// A filter is wrong.
    Query(FieldError),
    /// The store failed.
    Store(StoreError),
}

impl ErrorCode for AuditError {
    fn code(&self) -> Code {
        match self {
            AuditError::Query(_) => Code::InvalidQuery,
            AuditError::Store(e) => e.code(),
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            AuditError::Query(e) => Cow::Borrowed(&e.message),
            AuditError::Store(e) => e.message(),
        }
    }

    fn field(&self) -> Option<&str> {
        match self {
            AuditError::Query(e) => Some(&e.field),
            AuditError::Store(e) => e.field(),
        }
    }
}

/// Reads the audit log (entries are written by the changes they record).
#[derive(Clone)]
pub struct AuditService {
    store: Arc<dyn AuditStore>,
}

impl AuditService {
    /// A service over `store`.
    pub fn new(store: Arc<dyn AuditStore>) -> Self {
        Self { store }
    }

    /// At most `limit` entries, newest first, of `action` (empty: any) by
    /// `actor_id`, older than `before` (an entry id or an RFC 3339 instant).
    pub async fn entries(
        &self,
        action: Option<String>,
        actor_id: Option<Uuid>,
        limit: u64,
        before: Option<&str>,
    ) -> Result<Vec<AuditEntry>, AuditError> {
        if action
            .as_ref()
            .is_some_and(|a| a.chars().count() > ACTION_MAX)
        {
            return Err(AuditError::Query(FieldError::new(
                "action",
                format!("must be at most {ACTION_MAX} characters"),
            )));
        }
        let before = match before {
            None => None,
            Some(raw) => Some(match raw.parse() {
                Ok(id) => Before::Id(id),
                Err(_) => Before::Time(
                    chrono::DateTime::parse_from_rfc3339(raw)
                        .map_err(|_| {
                            AuditError::Query(FieldError::new(
                                "before",
                                "must be an entry id or an RFC 3339 instant",
                            ))
                        })?
                        .to_utc(),
                ),
            }),
        };
        let query = AuditQuery {
            action: action.filter(|a| !a.is_empty()),
            actor_id,
            limit,
            before,
        };
        self.store.audit(&query).await.map_err(AuditError::Store)
    }
}
