//! Values cached per instance and invalidated through LISTEN/NOTIFY, so a
//! change made on any instance applies on the next request of every instance:
//! the runtime settings, and the catalog of resources with their grants.
//! While the listener is not connected, nothing is cached.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sea_orm::DatabaseConnection;
use sea_orm::sqlx::postgres::PgListener;

/// The channel a settings change is announced on.
pub(crate) const SETTINGS_CHANNEL: &str = "tessera_settings";
/// The channel resource and grant changes are announced on (by triggers).
pub(crate) const CATALOG_CHANNEL: &str = "tessera_catalog";

/// One cached value and whether it may be trusted.
#[derive(Debug)]
pub(crate) struct NotifiedCache<T> {
    value: RwLock<Option<Arc<T>>>,
    listening: AtomicBool,
    /// Bumped by every invalidation, so a read that raced with one is not kept.
    generation: AtomicU64,
}

impl<T> Default for NotifiedCache<T> {
    fn default() -> Self {
        Self {
            value: RwLock::new(None),
            listening: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }
}

impl<T> NotifiedCache<T> {
    /// The cached value, when the listener vouches for it.
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        self.value.read().ok()?.clone()
    }

    /// The invalidation count to pass to [`NotifiedCache::put`] after reading.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps a value read when the cache was at `generation`, unless an
    /// invalidation came since or the listener is not connected.
    pub(crate) fn put(&self, value: Arc<T>, generation: u64) {
        if let Ok(mut slot) = self.value.write()
            && self.listening.load(Ordering::Acquire)
            && self.generation.load(Ordering::Acquire) == generation
        {
            *slot = Some(value);
        }
    }

    /// Forgets the cached value.
    pub(crate) fn clear(&self) {
        if let Ok(mut slot) = self.value.write() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            *slot = None;
        }
    }

    fn set_listening(&self, on: bool) {
        self.clear();
        self.listening.store(on, Ordering::Release);
    }
}

/// Something a notification channel invalidates.
pub(crate) trait Invalidate: Send + Sync {
    /// Drops the cached value.
    fn clear(&self);
    /// Marks whether notifications are being received.
    fn set_listening(&self, on: bool);
}

impl<T: Send + Sync> Invalidate for NotifiedCache<T> {
    fn clear(&self) {
        NotifiedCache::clear(self);
    }

    fn set_listening(&self, on: bool) {
        NotifiedCache::set_listening(self, on);
    }
}

/// Listens on every channel until the process ends, reconnecting as needed;
/// a notification clears the caches of its channel.
pub(crate) async fn watch(
    db: DatabaseConnection,
    caches: Vec<(&'static str, Arc<dyn Invalidate>)>,
) {
    let channels: Vec<&str> = caches.iter().map(|(channel, _)| *channel).collect();
    let set_all = |on: bool| caches.iter().for_each(|(_, c)| c.set_listening(on));
    loop {
        if let Ok(mut listener) = PgListener::connect_with(db.get_postgres_connection_pool()).await
            && listener.listen_all(channels.iter().copied()).await.is_ok()
        {
            set_all(true);
            // `None` means the connection dropped: notifications may be lost.
            while let Ok(Some(note)) = listener.try_recv().await {
                caches
                    .iter()
                    .filter(|(channel, _)| *channel == note.channel())
                    .for_each(|(_, cache)| cache.clear());
            }
        }
        set_all(false);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
