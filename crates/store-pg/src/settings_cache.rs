//! The runtime settings, cached per instance and invalidated through
//! LISTEN/NOTIFY, so a change made on any instance applies on the next request
//! of every instance. While the listener is not connected, nothing is cached.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kernel::settings::Settings;
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::postgres::PgListener;

/// The channel a settings change is announced on.
pub(crate) const CHANNEL: &str = "tessera_settings";

/// The cached settings and whether the cache may be trusted.
#[derive(Debug, Default)]
pub(crate) struct SettingsCache {
    value: RwLock<Option<Settings>>,
    listening: AtomicBool,
    /// Bumped by every invalidation, so a read that raced with one is not kept.
    generation: AtomicU64,
}

impl SettingsCache {
    /// The cached settings, when the listener vouches for them.
    pub(crate) fn get(&self) -> Option<Settings> {
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        self.value.read().ok()?.clone()
    }

    /// The invalidation count to pass to [`SettingsCache::put`] after reading.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps settings read when the cache was at `generation`, unless an
    /// invalidation came since or the listener is not connected.
    pub(crate) fn put(&self, settings: &Settings, generation: u64) {
        if let Ok(mut value) = self.value.write()
            && self.listening.load(Ordering::Acquire)
            && self.generation.load(Ordering::Acquire) == generation
        {
            *value = Some(settings.clone());
        }
    }

    /// Forgets the cached settings.
    pub(crate) fn clear(&self) {
        if let Ok(mut value) = self.value.write() {
            self.generation.fetch_add(1, Ordering::AcqRel);
            *value = None;
        }
    }

    fn set_listening(&self, on: bool) {
        self.clear();
        self.listening.store(on, Ordering::Release);
    }
}

/// Listens for settings changes until the process ends, reconnecting as needed.
pub(crate) async fn watch(db: DatabaseConnection, cache: Arc<SettingsCache>) {
    loop {
        match PgListener::connect_with(db.get_postgres_connection_pool()).await {
            Ok(mut listener) => {
                if listener.listen(CHANNEL).await.is_ok() {
                    cache.set_listening(true);
                    // `None` means the connection dropped: notifications may be lost.
                    while let Ok(Some(_)) = listener.try_recv().await {
                        cache.clear();
                    }
                }
                cache.set_listening(false);
            }
            Err(_) => cache.set_listening(false),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
