//! Versions of the state every instance caches, so a cache is checked against
//! the database rather than trusted (API.md section 1, several instances).

/// The version counters of the shared state, as one round trip read them.
/// Each only grows; a change bumps its counter in the change's transaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versions {
    /// Credentials, accounts, roles and role members.
    pub auth: i64,
    /// Resources, their exposure and columns, and grants.
    pub catalog: i64,
    /// The runtime settings.
    pub settings: i64,
}
