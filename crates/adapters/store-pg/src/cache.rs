//! State cached per instance and checked against the database: the runtime
//! settings, and the catalog of resources with their grants. Each value keeps
//! the version (`svc.cache_version`) it was read at; every request reads the
//! current versions in a round trip it already makes (the credential's, or a
//! probe when it has none), and a value older than what was read is loaded
//! again before use, so a change answered by any instance governs the next
//! request of every instance. NOTIFY only drops values early.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kernel::Versions;
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::postgres::PgListener;

/// The channel a settings change is announced on.
pub(crate) const SETTINGS_CHANNEL: &str = "tessera_settings";
/// The channel resource and grant changes are announced on (by triggers).
pub(crate) const CATALOG_CHANNEL: &str = "tessera_catalog";

/// The versions of `svc.cache_version`, read in one statement.
pub(crate) const VERSIONS_SQL: &str =
    "SELECT auth, catalog, settings FROM svc.cache_version LIMIT 1";

/// The highest versions any round trip of this instance has read: a cached
/// value older than these is not used.
#[derive(Debug, Default)]
pub(crate) struct SeenVersions {
    auth: AtomicI64,
    catalog: AtomicI64,
    settings: AtomicI64,
}

impl SeenVersions {
    /// Records versions a round trip read.
    pub(crate) fn observe(&self, seen: Versions) {
        self.auth.fetch_max(seen.auth, Ordering::AcqRel);
        self.catalog.fetch_max(seen.catalog, Ordering::AcqRel);
        self.settings.fetch_max(seen.settings, Ordering::AcqRel);
    }

    /// The newest catalog version seen.
    pub(crate) fn catalog(&self) -> i64 {
        self.catalog.load(Ordering::Acquire)
    }

    /// The newest settings version seen.
    pub(crate) fn settings(&self) -> i64 {
        self.settings.load(Ordering::Acquire)
    }
}

/// One cached value and the version it was read at.
#[derive(Debug)]
pub(crate) struct VersionedCache<T> {
    value: RwLock<Option<(Arc<T>, i64)>>,
}

impl<T> Default for VersionedCache<T> {
    fn default() -> Self {
        Self {
            value: RwLock::new(None),
        }
    }
}

impl<T> VersionedCache<T> {
    /// The cached value and its version, when it is at least `seen`.
    pub(crate) fn get(&self, seen: i64) -> Option<(Arc<T>, i64)> {
        self.value
            .read()
            .ok()?
            .as_ref()
            .filter(|(_, version)| *version >= seen)
            .cloned()
    }

    /// Keeps a value read at `version` (the version was read before the
    /// value, so the value is at least that new), unless a newer one is held.
    pub(crate) fn put(&self, value: Arc<T>, version: i64) {
        if let Ok(mut slot) = self.value.write()
            && slot.as_ref().is_none_or(|(_, held)| *held < version)
        {
            *slot = Some((value, version));
        }
    }

    /// Forgets the cached value.
    pub(crate) fn clear(&self) {
        if let Ok(mut slot) = self.value.write() {
            *slot = None;
        }
    }
}

/// Something a notification channel invalidates.
pub(crate) trait Invalidate: Send + Sync {
    /// Drops the cached value.
    fn clear(&self);
}

impl<T: Send + Sync> Invalidate for VersionedCache<T> {
    fn clear(&self) {
        VersionedCache::clear(self);
    }
}

/// Listens on every channel until the process ends, reconnecting as needed;
/// a notification clears the caches of its channel. Only a fast path: the
/// versions keep the caches correct without it.
pub(crate) async fn watch(
    db: DatabaseConnection,
    caches: Vec<(&'static str, Arc<dyn Invalidate>)>,
) {
    let channels: Vec<&str> = caches.iter().map(|(channel, _)| *channel).collect();
    loop {
        if let Ok(mut listener) = PgListener::connect_with(db.get_postgres_connection_pool()).await
            && listener.listen_all(channels.iter().copied()).await.is_ok()
        {
            while let Ok(Some(note)) = listener.try_recv().await {
                metrics::counter!("tessera_cache_invalidations_total", "channel" => note.channel().to_owned())
                    .increment(1);
                caches
                    .iter()
                    .filter(|(channel, _)| *channel == note.channel())
                    .for_each(|(_, cache)| cache.clear());
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
