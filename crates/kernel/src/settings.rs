//! The registry of runtime settings: every key, its default and its validation.
//! Stored overrides live in `svc.settings`; everything else takes the default.

use serde_json::{Map, Value, json};

use crate::error::FieldError;
use crate::id::USERS_ROLE_ID;
use crate::validate::TimeZoneName;

/// How a setting's value is checked.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Bool,
    PositiveNumber,
    Int { min: i64, max: i64 },
    RoleId,
    OptionalUrl,
    OptionalZone,
    Origins,
    OAuth,
}

/// One runtime setting.
#[derive(Debug)]
struct Key {
    name: &'static str,
    rule: Rule,
    /// Changeable only by an administrator signed in with a session.
    session_only: bool,
}

const fn key(name: &'static str, rule: Rule) -> Key {
    Key {
        name,
        rule,
        session_only: false,
    }
}

const KEYS: &[Key] = &[
    key("auth.session_ttl_hours", Rule::PositiveNumber),
    key("auth.registration_enabled", Rule::Bool),
    key("auth.registration_role_id", Rule::RoleId),
    key("auth.email_verification_required", Rule::Bool),
    key("auth.password_min_length", Rule::Int { min: 8, max: 128 }),
    key("auth.lockout_threshold", Rule::Int { min: 1, max: 1000 }),
    key(
        "auth.lockout_minutes",
        Rule::Int {
            min: 1,
            max: 525_600,
        },
    ),
    key(
        "auth.login_rate_limit_per_minute",
        Rule::Int {
            min: 0,
            max: 10_000,
        },
    ),
    key(
        "auth.account_rate_limit_per_minute",
        Rule::Int {
            min: 0,
            max: 10_000,
        },
    ),
    key(
        "auth.emails_per_address_per_hour",
        Rule::Int {
            min: 1,
            max: 10_000,
        },
    ),
    key("auth.email_links_base_url", Rule::OptionalUrl),
    key("auth.oauth", Rule::OAuth),
    key("auth.redirect_allow_list", Rule::Origins),
    key("system.timezone", Rule::OptionalZone),
    key("security.cors_origins", Rule::Origins),
    key(
        "workflows.max_sync_wait_ms",
        Rule::Int {
            min: 1,
            max: 3_600_000,
        },
    ),
    key(
        "workflows.public_rate_limit_per_minute",
        Rule::Int {
            min: 1,
            max: 1_000_000,
        },
    ),
    key("workflows.http_allow_private", Rule::Bool),
    key(
        "workflows.run_retention_days",
        Rule::Int {
            min: 1,
            max: 36_500,
        },
    ),
    Key {
        name: "mcp.enabled",
        rule: Rule::Bool,
        session_only: true,
    },
    Key {
        name: "sql_console.allow_api_tokens",
        rule: Rule::Bool,
        session_only: true,
    },
    key(
        "sql_console.timeout_ms",
        Rule::Int {
            min: 100,
            max: 3_600_000,
        },
    ),
    key(
        "realtime.replay_seconds",
        Rule::Int {
            min: 0,
            max: i64::MAX,
        },
    ),
    key(
        "realtime.max_subscribers",
        Rule::Int {
            min: 1,
            max: i64::MAX,
        },
    ),
    key(
        "realtime.max_subscribers_per_user",
        Rule::Int {
            min: 1,
            max: i64::MAX,
        },
    ),
    key(
        "data.statement_timeout_ms",
        Rule::Int {
            min: 100,
            max: 3_600_000,
        },
    ),
    key(
        "files.max_bytes",
        Rule::Int {
            min: 1,
            max: i64::MAX,
        },
    ),
];

const OAUTH_PROVIDERS: [&str; 3] = ["google", "github", "oidc"];

/// The fields each provider of `auth.oauth` accepts (API.md section 3a):
/// Google takes GitHub's fields but `apiUrl`, OIDC only its issuer.
fn oauth_fields(provider: &str) -> &'static [&'static str] {
    const GITHUB: [&str; 7] = [
        "enabled",
        "clientId",
        "clientSecret",
        "authorizeUrl",
        "tokenUrl",
        "userinfoUrl",
        "apiUrl",
    ];
    match provider {
        "github" => &GITHUB,
        "oidc" => &["enabled", "clientId", "clientSecret", "issuer"],
        _ => &GITHUB[..6],
    }
}

/// A provider's settings before anything is configured: off, every field null.
fn oauth_default(provider: &str) -> Value {
    let fields = oauth_fields(provider)
        .iter()
        .map(|f| {
            let value = if *f == "enabled" {
                json!(false)
            } else {
                Value::Null
            };
            (f.to_string(), value)
        })
        .collect::<Map<_, _>>();
    Value::Object(fields)
}

fn default_of(name: &str) -> Value {
    match name {
        "auth.session_ttl_hours" => json!(720),
        "auth.registration_role_id" => json!(USERS_ROLE_ID),
        "auth.password_min_length" => json!(8),
        "auth.lockout_threshold" => json!(10),
        "auth.lockout_minutes" => json!(15),
        "auth.login_rate_limit_per_minute" => json!(60),
        "auth.account_rate_limit_per_minute" => json!(30),
        "auth.emails_per_address_per_hour" => json!(5),
        "realtime.max_subscribers_per_user" => json!(20),
        "data.statement_timeout_ms" => json!(15_000),
        "auth.oauth" => OAUTH_PROVIDERS
            .iter()
            .map(|p| (p.to_string(), oauth_default(p)))
            .collect::<Map<_, _>>()
            .into(),
        "auth.redirect_allow_list" | "security.cors_origins" => json!([]),
        "workflows.max_sync_wait_ms" | "sql_console.timeout_ms" => json!(30_000),
        "workflows.public_rate_limit_per_minute" => json!(60),
        "workflows.run_retention_days" => json!(30),
        "files.max_bytes" => json!(26_214_400),
        "realtime.replay_seconds" => json!(300),
        "realtime.max_subscribers" => json!(10_000),
        "auth.registration_enabled"
        | "auth.email_verification_required"
        | "workflows.http_allow_private"
        | "mcp.enabled"
        | "sql_console.allow_api_tokens" => json!(false),
        _ => Value::Null,
    }
}

/// A change request that was validated key by key.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsPatch {
    /// The normalised new values, by key.
    pub values: Map<String, Value>,
    /// For keys whose new value was merged with the stored one (`auth.oauth`),
    /// the stored value it was merged with: the store refuses the patch as
    /// stale when another change got there first.
    pub merged_with: Map<String, Value>,
}

impl SettingsPatch {
    /// Validates a PATCH body against the registry. `current` supplies stored
    /// secrets that a write-only field leaves unchanged when sent as null.
    pub fn parse(body: &Map<String, Value>, current: &Settings) -> Result<Self, FieldError> {
        let mut values = Map::new();
        let mut merged_with = Map::new();
        for (name, value) in body {
            let key = KEYS
                .iter()
                .find(|k| k.name == name)
                .ok_or_else(|| FieldError::new(name.clone(), "unknown setting"))?;
            let value = check(key, value, current)?;
            if matches!(key.rule, Rule::OAuth) {
                merged_with.insert(name.clone(), current.value(name).clone());
            }
            values.insert(name.clone(), value);
        }
        Ok(Self {
            values,
            merged_with,
        })
    }

    /// Whether the patch touches a key only a signed-in administrator may change.
    pub fn needs_session(&self) -> bool {
        KEYS.iter()
            .any(|k| k.session_only && self.values.contains_key(k.name))
    }

    /// The role id the patch sets as registration role, when it sets one.
    pub fn registration_role_id(&self) -> Option<uuid::Uuid> {
        self.values
            .get("auth.registration_role_id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    }
}

fn check(key: &Key, value: &Value, current: &Settings) -> Result<Value, FieldError> {
    let field = key.name;
    let fail = |message: &'static str| Err(FieldError::new(field, message));
    match key.rule {
        Rule::Bool if value.is_boolean() => Ok(value.clone()),
        Rule::Bool => fail("must be a boolean"),
        Rule::PositiveNumber => match value.as_f64() {
            Some(n) if n > 0.0 && n.is_finite() && n <= 87_600.0 * 10.0 => Ok(value.clone()),
            _ => fail("must be a number greater than 0"),
        },
        Rule::Int { min, max } => match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(value.clone()),
            _ => Err(FieldError::new(
                field,
                format!("must be an integer from {min} to {max}"),
            )),
        },
        Rule::RoleId => match value.as_str().map(str::parse::<uuid::Uuid>) {
            Some(Ok(id)) => Ok(json!(id)),
            _ => fail("must be a role id"),
        },
        Rule::OptionalUrl => match value {
            Value::Null => Ok(Value::Null),
            Value::String(s) if is_http_url(s) => Ok(json!(s.trim_end_matches('/'))),
            _ => fail("must be an http(s) URL or null"),
        },
        Rule::OptionalZone => match value {
            Value::Null => Ok(Value::Null),
            Value::String(s) => Ok(json!(TimeZoneName::parse(s, field)?.into_inner())),
            _ => fail("must be an IANA time zone name or null"),
        },
        Rule::Origins => {
            let Some(items) = value.as_array() else {
                return fail("must be an array of origins");
            };
            if items.len() > 100 {
                return fail("must have at most 100 origins");
            }
            let mut origins = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some("*") => origins.push(json!("*")),
                    Some(s) if is_origin(s) => origins.push(json!(s.trim_end_matches('/'))),
                    _ => {
                        return fail(
                            "each entry must be an origin such as https://app.example.com, or *",
                        );
                    }
                }
            }
            Ok(Value::Array(origins))
        }
        Rule::OAuth => check_oauth(value, current.value("auth.oauth")),
    }
}

/// Checks a PATCH of `auth.oauth`: each provider given replaces the stored
/// one (fields not given take their defaults), except a `clientSecret` that is
/// null or absent, which keeps the stored secret.
fn check_oauth(value: &Value, stored: &Value) -> Result<Value, FieldError> {
    let Some(providers) = value.as_object() else {
        return Err(FieldError::new("auth.oauth", "must be an object"));
    };
    let mut merged = stored.clone();
    for (provider, settings) in providers {
        if !OAUTH_PROVIDERS.contains(&provider.as_str()) {
            return Err(FieldError::new(
                format!("auth.oauth.{provider}"),
                "unknown provider (google, github or oidc)",
            ));
        }
        let Some(fields) = settings.as_object() else {
            return Err(FieldError::new(
                format!("auth.oauth.{provider}"),
                "must be an object",
            ));
        };
        let mut replaced = oauth_default(provider);
        replaced["clientSecret"] = stored[provider.as_str()]["clientSecret"].clone();
        for (name, v) in fields {
            let path = format!("auth.oauth.{provider}.{name}");
            if !oauth_fields(provider).contains(&name.as_str()) {
                return Err(FieldError::new(path, "unknown field"));
            }
            let ok = match (name.as_str(), v) {
                ("enabled", Value::Bool(_)) | (_, Value::Null) => true,
                ("enabled", _) => false,
                ("clientId" | "clientSecret", Value::String(s)) => s.len() <= 512,
                (_, Value::String(s)) => is_http_url(s),
                _ => false,
            };
            if !ok {
                return Err(FieldError::new(path, "has a wrong type or value"));
            }
            // A write-only secret sent back as null keeps the stored one.
            if name == "clientSecret" && v.is_null() {
                continue;
            }
            replaced[name.as_str()] = v.clone();
        }
        merged[provider.as_str()] = replaced;
    }
    Ok(merged)
}

fn is_http_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    matches!(rest, Some(r) if !r.is_empty() && s.len() <= 2048 && !s.chars().any(|c| c.is_whitespace() || c.is_control()))
}

fn is_origin(s: &str) -> bool {
    if !is_http_url(s) {
        return false;
    }
    let host = s
        .split_once("://")
        .map(|(_, h)| h.trim_end_matches('/'))
        .unwrap_or("");
    !host.is_empty() && !host.contains(['/', '?', '#'])
}

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

    /// Public webhook calls one source address may make in any 60 s.
    pub fn public_rate_limit_per_minute(&self) -> u32 {
        u32::try_from(self.int("workflows.public_rate_limit_per_minute")).unwrap_or(60)
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

    /// Applies a validated patch.
    pub fn apply(&mut self, patch: &SettingsPatch) {
        for (k, v) in &patch.values {
            self.values.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: Value) -> Result<SettingsPatch, FieldError> {
        patch_over(body, &Settings::default())
    }

    /// A patch of `body` validated against the `current` settings.
    fn patch_over(body: Value, current: &Settings) -> Result<SettingsPatch, FieldError> {
        SettingsPatch::parse(body.as_object().unwrap(), current)
    }

    #[test]
    fn defaults() {
        let s = Settings::default();
        assert_eq!(s.session_ttl_hours(), 720.0);
        assert_eq!(s.lockout_threshold(), 10);
        assert!(!s.registration_enabled());
        assert_eq!(s.cors_origins().count(), 0);
        assert_eq!(s.value("auth.registration_role_id"), &json!(USERS_ROLE_ID));
    }

    #[test]
    fn validation() {
        assert!(patch(json!({ "auth.session_ttl_hours": 0.5 })).is_ok());
        assert_eq!(patch(json!({ "nope": 1 })).unwrap_err().field, "nope");
        assert!(patch(json!({ "auth.session_ttl_hours": 0 })).is_err());
        assert!(patch(json!({ "auth.password_min_length": 7 })).is_err());
        assert!(patch(json!({ "auth.registration_enabled": "yes" })).is_err());
        assert!(patch(json!({ "system.timezone": "Nowhere/Else" })).is_err());
        assert!(patch(json!({ "security.cors_origins": ["https://a.example/path"] })).is_err());
        assert!(patch(json!({ "security.cors_origins": ["https://a.example", "*"] })).is_ok());
        assert!(
            patch(json!({ "mcp.enabled": true }))
                .unwrap()
                .needs_session()
        );
        assert!(
            !patch(json!({ "auth.lockout_minutes": 5 }))
                .unwrap()
                .needs_session()
        );
    }

    #[test]
    fn oauth_secret_is_write_only() {
        let mut s = Settings::default();
        let p = patch(json!({ "auth.oauth": { "github": { "enabled": true, "clientId": "id", "clientSecret": "shh" } } })).unwrap();
        s.apply(&p);
        assert_eq!(s.value("auth.oauth")["github"]["clientSecret"], "shh");
        assert!(s.public_view()["auth.oauth"]["github"]["clientSecret"].is_null());
        let keep = json!({ "auth.oauth": { "github": { "clientSecret": null } } });
        let keep = patch_over(keep, &s).unwrap();
        s.apply(&keep);
        assert_eq!(s.value("auth.oauth")["github"]["clientSecret"], "shh");
    }

    #[test]
    fn oauth_fields_follow_the_provider() {
        let mut s = Settings::default();
        let github = patch(json!({ "auth.oauth": { "github": {
            "enabled": true, "clientId": "id", "apiUrl": "https://ghe.example/api/v3" } } }))
        .unwrap();
        s.apply(&github);
        assert_eq!(
            s.value("auth.oauth")["github"]["apiUrl"],
            "https://ghe.example/api/v3"
        );
        let oidc = json!({ "auth.oauth": { "oidc": { "issuer": "https://id.example" } } });
        assert!(patch(oidc).is_ok());
        for (provider, field) in [
            ("google", "apiUrl"),
            ("oidc", "tokenUrl"),
            ("google", "issuer"),
        ] {
            let body = json!({ "auth.oauth": { provider: { field: "https://x.example" } } });
            assert_eq!(
                patch(body).unwrap_err().field,
                format!("auth.oauth.{provider}.{field}")
            );
        }
        // A provider given again replaces the stored one; its secret stays.
        let again = json!({ "auth.oauth": { "github": { "enabled": false } } });
        let again = patch_over(again, &s).unwrap();
        s.apply(&again);
        assert!(s.value("auth.oauth")["github"]["apiUrl"].is_null());
        assert_eq!(s.value("auth.oauth")["github"]["clientId"], Value::Null);
    }
}
