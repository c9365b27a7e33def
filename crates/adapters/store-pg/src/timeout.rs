//! `data.statement_timeout_ms` on the pool's connections (API.md 16).
//!
//! Every statement a caller's query shapes (Data API, DataViews, realtime
//! reads, MCP tools, workflow data steps) must stop at the timeout, the hot
//! list route included, without a round trip of its own. So the timeout is
//! a setting of the connection, carried in the startup packet of every new
//! connection; when the setting changes, connections opened before are
//! retired as they are next acquired (the pool's `before_acquire`, and the
//! read lane's own check), so no statement runs under an older value for
//! longer than the connection it is on. Statements that set their own
//! (`SET LOCAL`: the SQL console, schema changes) are unaffected.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use sea_orm::sqlx::postgres::PgConnectOptions;

/// When any pool of the process last changed its timeout, in milliseconds
/// since [`epoch`]; connections opened before are retired.
static CHANGED_AT_MS: AtomicU64 = AtomicU64::new(0);
/// How many times any pool of the process changed its timeout.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Whether a connection of age `age` was opened after the last change, so
/// that it carries the current timeout.
pub(crate) fn current(age: Duration) -> bool {
    let changed = CHANGED_AT_MS.load(Ordering::Acquire);
    changed == 0 || Duration::from_millis(since_epoch_ms().saturating_sub(changed)) > age
}

/// The count of changes so far; a connection acquired at an older count
/// may carry an older timeout.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// The timeout a pool's new connections start with.
#[derive(Debug)]
pub(crate) struct StatementTimeout {
    /// The pool's options before any timeout was added to them.
    base: OnceLock<PgConnectOptions>,
    /// The settings version and the value (milliseconds, 0: none yet)
    /// new connections carry.
    applied: Mutex<(i64, u64)>,
}

impl StatementTimeout {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            base: OnceLock::new(),
            applied: Mutex::new((i64::MIN, 0)),
        })
    }

    /// Makes `ms`, read at settings version `version`, the timeout of
    /// `db`'s connections from now on, unless a newer version was heeded
    /// (two loads may finish out of order) or the value is already that.
    pub(crate) fn heed(&self, db: &crate::db::Db, version: i64, ms: u64) {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        if version < applied.0 {
            return;
        }
        let unchanged = applied.1 == ms;
        *applied = (version, ms);
        // Behind a pooler, each transaction sets it.
        if unchanged || db.set_pooled_timeout(ms) {
            return;
        }
        let pool = db.pool();
        let base = self
            .base
            .get_or_init(|| pool.connect_options().as_ref().clone());
        pool.set_connect_options(
            base.clone()
                .options([("statement_timeout", ms.to_string())]),
        );
        GENERATION.fetch_add(1, Ordering::AcqRel);
        CHANGED_AT_MS.store(since_epoch_ms().max(1), Ordering::Release);
    }
}
