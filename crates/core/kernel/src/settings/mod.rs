//! The runtime settings: every key, its default and its validation
//! (`registry`), a validated change (`patch`), and the settings in force
//! with a typed accessor per key. Stored overrides live in `svc.settings`;
//! everything else takes the default.

mod patch;
mod registry;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use crate::id::USERS_ROLE_ID;

pub use patch::SettingsPatch;
use registry::KEYS;
pub use registry::{PUBLIC_RATE_LIMIT_KEY, default_of, session_only};

/// All settings in force: stored values over defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    values: Map<String, Value>,
}

impl Default for Settings {
    fn default() -> Self {
        Self::from_stored(Map::new())
    }
}

impl Settings {
    /// Builds the settings from the stored overrides; unknown stored keys are ignored.
    pub fn from_stored(stored: Map<String, Value>) -> Self {
        let values = KEYS
            .iter()
            .map(|k| {
                let value = stored
                    .get(k.name)
                    .cloned()
                    .unwrap_or_else(|| default_of(k.name));
                (k.name.to_owned(), value)
            })
            .collect();
        Self { values }
    }

    /// The raw value of `key` (null for an unknown key).
    pub fn value(&self, key: &str) -> &Value {
        self.values.get(key).unwrap_or(&Value::Null)
    }

    /// Every setting as clients may read it: write-only secrets read back as null.
    pub fn public_view(&self) -> Map<String, Value> {
        let mut view = self.values.clone();
        if let Some(Value::Object(providers)) = view.get_mut("auth.oauth") {
            for provider in providers.values_mut() {
                if let Some(p) = provider.as_object_mut() {
                    p.insert("clientSecret".into(), Value::Null);
                }
            }
        }
        view
    }

    fn bool(&self, key: &str) -> bool {
        self.value(key).as_bool().unwrap_or(false)
    }

    fn int(&self, key: &str) -> i64 {
        self.value(key)
            .as_i64()
            .or_else(|| default_of(key).as_i64())
            .unwrap_or(0)
    }

    /// Session lifetime in hours (fractions allowed).
    pub fn session_ttl_hours(&self) -> f64 {
        self.value("auth.session_ttl_hours")
            .as_f64()
            .unwrap_or(720.0)
    }

    /// Whether an administrator's session needs a second factor on the
    /// account to reach anything but its own enrollment.
    pub fn mfa_required_for_admins(&self) -> bool {
        self.bool("auth.mfa_required_for_admins")
    }

    /// Whether people may sign in with a code sent to their email.
    pub fn email_code_enabled(&self) -> bool {
        self.bool("auth.email_code_enabled")
    }

    /// Whether self-registration is open.
    pub fn registration_enabled(&self) -> bool {
        self.bool("auth.registration_enabled")
    }

    /// The role self-registered accounts get.
    pub fn registration_role(&self) -> uuid::Uuid {
        self.value("auth.registration_role_id")
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(USERS_ROLE_ID)
    }

    /// Whether sign-in needs a verified email.
    pub fn email_verification_required(&self) -> bool {
        self.bool("auth.email_verification_required")
    }

    /// Minimum password length in characters.
    pub fn password_min_length(&self) -> usize {
        usize::try_from(self.int("auth.password_min_length")).unwrap_or(8)
    }

    /// Failed sign-ins in a row that lock an account.
    pub fn lockout_threshold(&self) -> i32 {
        i32::try_from(self.int("auth.lockout_threshold")).unwrap_or(10)
    }

    /// Sign-in attempts one source address may make in any 60 s; 0 is no limit.
    pub fn login_rate_limit_per_minute(&self) -> u32 {
        u32::try_from(self.int("auth.login_rate_limit_per_minute")).unwrap_or(60)
    }

    /// Calls of the public account routes one source address may make in
    /// any 60 s, all routes together; 0 is no limit.
    pub fn account_rate_limit_per_minute(&self) -> u32 {
        u32::try_from(self.int("auth.account_rate_limit_per_minute")).unwrap_or(30)
    }

    /// Reset, verification and sign-in code emails one address may receive
    /// in any hour.
    pub fn emails_per_address_per_hour(&self) -> u32 {
        u32::try_from(self.int("auth.emails_per_address_per_hour")).unwrap_or(5)
    }

    /// `data.statement_timeout_ms`: the longest a statement shaped by a
    /// caller's query may run.
    pub fn data_statement_timeout_ms(&self) -> u64 {
        u64::try_from(self.int("data.statement_timeout_ms")).unwrap_or(15_000)
    }

    /// `data.replica_max_lag_ms`: how far behind the primary a read
    /// replica may be and still serve reads.
    pub fn data_replica_max_lag_ms(&self) -> u64 {
        u64::try_from(self.int("data.replica_max_lag_ms")).unwrap_or(1_000)
    }

    /// How long a lock lasts, in minutes.
    pub fn lockout_minutes(&self) -> i64 {
        self.int("auth.lockout_minutes")
    }

    /// The instance's default time zone, if set.
    pub fn system_timezone(&self) -> Option<&str> {
        self.value("system.timezone").as_str()
    }

    /// The SQL console's `statement_timeout`, in milliseconds.
    pub fn sql_console_timeout_ms(&self) -> u64 {
        u64::try_from(self.int("sql_console.timeout_ms")).unwrap_or(30_000)
    }

    /// `sql_console.allow_api_tokens`.
    pub fn sql_console_allow_api_tokens(&self) -> bool {
        self.bool("sql_console.allow_api_tokens")
    }

    /// `mcp.enabled`.
    pub fn mcp_enabled(&self) -> bool {
        self.bool("mcp.enabled")
    }

    /// `data.max_answer_bytes`: the largest answer a read builds (API.md 17).
    pub fn data_max_answer_bytes(&self) -> u64 {
        u64::try_from(self.int("data.max_answer_bytes")).unwrap_or(33_554_432)
    }

    /// `data.import_max_bytes`: the largest CSV body an import takes.
    pub fn data_import_max_bytes(&self) -> u64 {
        u64::try_from(self.int("data.import_max_bytes")).unwrap_or(104_857_600)
    }

    /// `files.max_bytes`.
    pub fn files_max_bytes(&self) -> u64 {
        u64::try_from(self.int("files.max_bytes")).unwrap_or(26_214_400)
    }

    /// `realtime.replay_seconds`: how far back `Last-Event-ID` replays.
    pub fn realtime_replay_seconds(&self) -> u64 {
        u64::try_from(self.int("realtime.replay_seconds")).unwrap_or(300)
    }

    /// `realtime.max_subscribers`: open streams per instance.
    pub fn realtime_max_subscribers(&self) -> usize {
        usize::try_from(self.int("realtime.max_subscribers")).unwrap_or(10_000)
    }

    /// `realtime.max_subscribers_per_user`: open streams of one user on
    /// all instances together.
    pub fn realtime_max_subscribers_per_user(&self) -> u64 {
        u64::try_from(self.int("realtime.max_subscribers_per_user")).unwrap_or(20)
    }

    /// Longest a synchronous webhook waits for its run, in milliseconds.
    pub fn max_sync_wait_ms(&self) -> u64 {
        u64::try_from(self.int("workflows.max_sync_wait_ms")).unwrap_or(30_000)
    }

    /// How long a write hook may run (`workflows.hook_timeout_ms`).
    pub fn hook_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            u64::try_from(self.int("workflows.hook_timeout_ms")).unwrap_or(2_000),
        )
    }

    /// Script steps run at once (`workflows.script_concurrency`).
    pub fn script_concurrency(&self) -> usize {
        usize::try_from(self.int("workflows.script_concurrency")).unwrap_or(1)
    }

    /// Whether the http step may reach loopback, private and link-local addresses.
    pub fn http_allow_private(&self) -> bool {
        self.bool("workflows.http_allow_private")
    }

    /// Days finished runs are kept.
    pub fn run_retention_days(&self) -> i64 {
        self.int("workflows.run_retention_days")
    }

    /// Origins allowed to call the API from a browser.
    pub fn cors_origins(&self) -> impl Iterator<Item = &str> {
        self.value("security.cors_origins")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// The WebAuthn relying party id set for passkeys, if any.
    pub fn passkey_rp_id(&self) -> Option<&str> {
        self.value("auth.passkey_rp_id").as_str()
    }

    /// The origins accepted in a passkey's `clientDataJSON`.
    pub fn passkey_origins(&self) -> impl Iterator<Item = &str> {
        self.value("auth.passkey_origins")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// Applies a validated patch.
    pub fn apply(&mut self, patch: &SettingsPatch) {
        for (k, v) in &patch.values {
            self.values.insert(k.clone(), v.clone());
        }
    }
}

/// The providers whose `trustEmail` goes from `stored` to `new` (two values
/// of `auth.oauth`, `new` naming only the providers it changes), with the
/// new value: what the audit names when a provider's unverified emails
/// become trusted, or stop being.
pub fn trust_email_changes(stored: &Value, new: &Value) -> Map<String, Value> {
    let Value::Object(providers) = new else {
        return Map::new();
    };
    providers
        .iter()
        .filter_map(|(provider, fields)| {
            let trusted = fields["trustEmail"] == Value::Bool(true);
            let was = stored[provider.as_str()]["trustEmail"] == Value::Bool(true);
            (trusted != was).then(|| (provider.clone(), Value::Bool(trusted)))
        })
        .collect()
}
