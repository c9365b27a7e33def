//! Who calls: the request as it arrives, the caller it resolves to, and the
//! caller each credential stood for when last resolved, so a request can be
//! answered in one round trip while its auth version is current. The one
//! place where a request planned on stale shared state is planned again.

use std::collections::HashMap;
use std::sync::RwLock;

use auth::{CredentialLookup, Resolved};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use permissions::{Plane, Principal};

use crate::error::DataError;
use crate::service::DataService;

/// Requests planned again when the shared state changes under them, before
/// answering 503.
const STALE_RETRIES: usize = 3;

/// A request as it arrives: the bearer secret, resolved by the request's own
/// statement, and where the request comes from.
#[derive(Debug, Clone, Copy)]
pub struct DataRequest<'a> {
    /// The `Authorization: Bearer` secret.
    pub bearer: &'a str,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
    /// The client address, for the audit log.
    pub ip: Option<&'a str>,
}

impl<'a> DataRequest<'a> {
    /// The request as made by `principal`.
    fn caller<'p>(&self, principal: &'p Principal) -> Caller<'p>
    where
        'a: 'p,
    {
        Caller {
            principal,
            zone_header: self.zone_header,
            ip: self.ip,
        }
    }
}

/// Who is asking, and from where.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The authenticated caller.
    pub principal: &'a Principal,
    /// The `X-Service-Timezone` header, if sent.
    pub zone_header: Option<&'a str>,
    /// The client address, for the audit log.
    pub ip: Option<&'a str>,
}

/// What a request does to the data: decides whether a failure with a
/// remembered caller is tried again with the credential resolved afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Changes nothing: tried again after any failure but a timeout.
    Reads,
    /// Inserts, updates or deletes: tried again only when nothing reached
    /// the database or it found the versions stale (a write is never sent
    /// twice).
    Writes,
}

impl Effect {
    /// Whether `error`, met with a remembered caller, is tried again.
    pub fn retries(self, error: &DataError) -> bool {
        match error {
            DataError::At { error, .. } => self.retries(error),
            _ if !error.retried() => false,
            _ if self == Effect::Reads => true,
            DataError::Store(e) => matches!(e, StoreError::Stale),
            DataError::Check(_) => false,
            // Planned on the remembered state, before the database.
            _ => true,
        }
    }
}

/// Runs `attempt` until it is answered on current shared state: a statement
/// that found its versions stale wrote nothing, so it is planned again, at
/// most three times, then refused as stale (503).
pub async fn until_current<T, E, Attempt>(
    mut attempt: impl FnMut() -> Attempt,
    is_stale: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    Attempt: Future<Output = Result<T, E>>,
    E: From<StoreError>,
{
    for _ in 0..STALE_RETRIES {
        match attempt().await {
            Err(error) if is_stale(&error) => continue,
            answer => return answer,
        }
    }
    Err(StoreError::Stale.into())
}

impl DataService {
    /// Runs `run` as the caller the bearer stands for on `plane`, with the
    /// Data API's rules. A credential resolved before is answered in one
    /// round trip: `run`'s statement checks that the caller, the table and
    /// the settings it was planned on are still current. When they are not,
    /// or the remembered caller is refused in a way `effect` retries, the
    /// credential is resolved afresh (which brings every cache up to date)
    /// and `run` planned again, so nothing is ever answered, written or
    /// refused on stale state. Only callers of the Data API plane are
    /// remembered.
    pub async fn as_caller<T>(
        &self,
        request: DataRequest<'_>,
        plane: Plane,
        effect: Effect,
        run: impl AsyncFn(Caller<'_>, i64) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        let lookup = CredentialLookup::of(request.bearer);
        let remembered = match plane {
            Plane::Api => self.callers.get(&lookup, self.clock.now()),
            Plane::Admin => None,
        };
        if let Some(known) = remembered {
            let caller = request.caller(&known.principal);
            match run(caller, known.version).await {
                Ok(answer) => return Ok(answer),
                Err(error) if !effect.retries(&error) => {
                    // Not planned again as it stands (a write is never sent
                    // twice, a timeout would only time out again), and
                    // answered only if the caller is still the one it was
                    // planned for.
                    match self
                        .unchanged(request, plane, &lookup, &known.principal)
                        .await?
                    {
                        true => return Err(error),
                        false if effect == Effect::Writes => return Err(StoreError::Stale.into()),
                        false => {}
                    }
                }
                Err(_) => {}
            }
        }
        self.as_current_caller(request, plane, run).await
    }

    /// Whether the bearer still stands for `principal` on `plane`: refused
    /// as resolving it afresh refuses it, false when its roles or anything
    /// else of the caller changed since (not merely the shared auth
    /// version, which any sign-out moves).
    async fn unchanged(
        &self,
        request: DataRequest<'_>,
        plane: Plane,
        lookup: &CredentialLookup,
        principal: &Principal,
    ) -> Result<bool, DataError> {
        match self.auth.resolve(request.bearer).await {
            Ok(resolved) => {
                resolved.principal.authorize(plane, false)?;
                Ok(resolved.principal == *principal)
            }
            Err(refused) => {
                self.callers.forget(lookup);
                Err(refused.into())
            }
        }
    }

    /// Runs `run` as the caller the bearer stands for on `plane`, resolved
    /// afresh (never a remembered caller): for work whose statements do not
    /// check the caller's version, so that a revoked credential is refused.
    pub async fn as_current_caller<T>(
        &self,
        request: DataRequest<'_>,
        plane: Plane,
        run: impl AsyncFn(Caller<'_>, i64) -> Result<T, DataError>,
    ) -> Result<T, DataError> {
        let lookup = CredentialLookup::of(request.bearer);
        let run = &run;
        until_current(
            || async move {
                // Refused now, the caller remembered from before is too
                // (a refusal by settings leaves the auth version as it was).
                let resolved = match self.auth.resolve(request.bearer).await {
                    Ok(resolved) => resolved,
                    Err(refused) => {
                        self.callers.forget(&lookup);
                        return Err(refused.into());
                    }
                };
                resolved.principal.authorize(plane, false)?;
                if plane == Plane::Api {
                    self.callers.put(lookup, &resolved);
                }
                run(request.caller(&resolved.principal), resolved.versions.auth).await
            },
            DataError::is_stale,
        )
        .await
    }
}

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

    /// Forgets the caller `lookup` stood for.
    pub(crate) fn forget(&self, lookup: &CredentialLookup) {
        if let Ok(mut known) = self.0.write() {
            known.remove(lookup);
        }
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

#[cfg(test)]
mod tests {
    use kernel::StoreError;

    use super::{Effect, until_current};
    use crate::error::DataError;

    #[test]
    fn reads_are_tried_again_but_after_a_timeout() {
        assert!(Effect::Reads.retries(&DataError::NotFound));
        assert!(Effect::Reads.retries(&DataError::Store(StoreError::Stale)));
        assert!(!Effect::Reads.retries(&DataError::Store(StoreError::QueryTimeout)));
    }

    #[test]
    fn writes_are_tried_again_only_when_nothing_reached_the_database() {
        assert!(Effect::Writes.retries(&DataError::Store(StoreError::Stale)));
        assert!(Effect::Writes.retries(&DataError::NotFound));
        assert!(!Effect::Writes.retries(&DataError::Check("no".into())));
        assert!(!Effect::Writes.retries(&DataError::Store(StoreError::RowDenied)));
        assert!(!Effect::Writes.retries(&DataError::Store(StoreError::QueryTimeout)));
    }

    #[tokio::test]
    async fn stale_attempts_are_planned_again_then_refused() {
        let mut calls = 0;
        let answer: Result<(), DataError> = until_current(
            || {
                calls += 1;
                async { Err(DataError::Store(StoreError::Stale)) }
            },
            DataError::is_stale,
        )
        .await;
        assert!(answer.is_err_and(|e| e.is_stale()));
        assert_eq!(calls, super::STALE_RETRIES);

        let mut calls = 0;
        let answer = until_current(
            || {
                calls += 1;
                let answer = if calls < 2 {
                    Err(DataError::Store(StoreError::Stale))
                } else {
                    Ok(calls)
                };
                async move { answer }
            },
            DataError::is_stale,
        )
        .await;
        assert_eq!(answer.ok(), Some(2));
    }
}
