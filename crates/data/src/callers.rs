//! The caller each credential stood for when last resolved, so a request
//! can be answered in one round trip while its auth version is current.

use std::collections::HashMap;
use std::sync::RwLock;

use auth::{CredentialLookup, Resolved};
use chrono::{DateTime, Utc};
use permissions::Principal;

/// Most credentials remembered; past it the memory starts afresh.
const KNOWN_CALLERS_MAX: usize = 10_000;

/// A caller as its credential was last resolved.
#[derive(Debug, Clone)]
pub(crate) struct KnownCaller {
    pub(crate) principal: Principal,
    /// The auth version it was resolved at.
    pub(crate) version: i64,
    expires_at: DateTime<Utc>,
}

/// The caller each credential stood for when last resolved, so a read can be
/// answered without resolving it again while its auth version is current
/// (the read's own statement checks that).
#[derive(Debug, Default)]
pub(crate) struct KnownCallers(RwLock<HashMap<CredentialLookup, KnownCaller>>);

impl KnownCallers {
    /// The caller `lookup` stood for, unless its credential has expired since.
    pub(crate) fn get(&self, lookup: &CredentialLookup, now: DateTime<Utc>) -> Option<KnownCaller> {
        self.0
            .read()
            .ok()?
            .get(lookup)
            .filter(|known| known.expires_at > now)
            .cloned()
    }

    pub(crate) fn put(&self, lookup: CredentialLookup, resolved: &Resolved) {
        if let Ok(mut known) = self.0.write() {
            if known.len() >= KNOWN_CALLERS_MAX {
                known.clear();
            }
            known.insert(
                lookup,
                KnownCaller {
                    principal: resolved.principal.clone(),
                    version: resolved.versions.auth,
                    expires_at: resolved.expires_at,
                },
            );
        }
    }
}
