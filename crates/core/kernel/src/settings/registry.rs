//! The registry: every key, how its value is checked, and its default.

use serde_json::{Map, Value, json};

use crate::id::USERS_ROLE_ID;

/// How a setting's value is checked.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rule {
    Bool,
    PositiveNumber,
    Int {
        min: i64,
        max: i64,
    },
    RoleId,
    OptionalUrl,
    OptionalZone,
    /// A domain name (no IP address, no port), or null.
    OptionalDomain,
    /// Origins; `wildcard`: `*` is allowed as one of them.
    Origins {
        wildcard: bool,
    },
    OAuth,
}

/// One runtime setting.
#[derive(Debug)]
pub(super) struct Key {
    pub(super) name: &'static str,
    pub(super) rule: Rule,
    /// Changeable only by an administrator signed in with a session.
    pub(super) session_only: bool,
}

const fn key(name: &'static str, rule: Rule) -> Key {
    Key {
        name,
        rule,
        session_only: false,
    }
}

/// The key of the public webhooks' rate limit, which the webhook's own
/// statement reads (so that a change answered by any instance governs the
/// next call).
pub const PUBLIC_RATE_LIMIT_KEY: &str = "workflows.public_rate_limit_per_minute";

pub(super) const KEYS: &[Key] = &[
    key("auth.session_ttl_hours", Rule::PositiveNumber),
    key("auth.registration_enabled", Rule::Bool),
    key("auth.registration_role_id", Rule::RoleId),
    key("auth.email_verification_required", Rule::Bool),
    key("auth.email_code_enabled", Rule::Bool),
    // Turning the rule off is an administrator's decision, never a token's.
    Key {
        name: "auth.mfa_required_for_admins",
        rule: Rule::Bool,
        session_only: true,
    },
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
    key("auth.redirect_allow_list", Rule::Origins { wildcard: true }),
    key("auth.passkey_rp_id", Rule::OptionalDomain),
    key("auth.passkey_origins", Rule::Origins { wildcard: false }),
    key("system.timezone", Rule::OptionalZone),
    key("security.cors_origins", Rule::Origins { wildcard: true }),
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
        "workflows.script_concurrency",
        Rule::Int { min: 1, max: 64 },
    ),
    key(
        "workflows.hook_timeout_ms",
        Rule::Int {
            min: 10,
            max: 30_000,
        },
    ),
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
        "data.replica_max_lag_ms",
        Rule::Int {
            min: 0,
            max: 60_000,
        },
    ),
    key(
        "files.max_bytes",
        Rule::Int {
            min: 1,
            max: i64::MAX,
        },
    ),
    key(
        "data.import_max_bytes",
        Rule::Int {
            min: 1024,
            max: i64::MAX,
        },
    ),
    key(
        "data.max_answer_bytes",
        Rule::Int {
            min: 1_048_576,
            max: i64::MAX,
        },
    ),
];

pub(super) const OAUTH_PROVIDERS: [&str; 3] = ["google", "github", "oidc"];

/// The fields each provider of `auth.oauth` accepts (API.md section 3a):
/// Google takes GitHub's fields but `apiUrl`, OIDC only its issuer; each
/// takes `trustEmail` (API.md 17).
pub(super) fn oauth_fields(provider: &str) -> &'static [&'static str] {
    match provider {
        "github" => &[
            "enabled",
            "clientId",
            "clientSecret",
            "authorizeUrl",
            "tokenUrl",
            "userinfoUrl",
            "apiUrl",
            "trustEmail",
        ],
        "oidc" => &[
            "enabled",
            "clientId",
            "clientSecret",
            "issuer",
            "trustEmail",
        ],
        _ => &[
            "enabled",
            "clientId",
            "clientSecret",
            "authorizeUrl",
            "tokenUrl",
            "userinfoUrl",
            "trustEmail",
        ],
    }
}

/// A provider's settings before anything is configured: off, every field null.
pub(super) fn oauth_default(provider: &str) -> Value {
    let fields = oauth_fields(provider)
        .iter()
        .map(|f| {
            let value = if matches!(*f, "enabled" | "trustEmail") {
                json!(false)
            } else {
                Value::Null
            };
            (f.to_string(), value)
        })
        .collect::<Map<_, _>>();
    Value::Object(fields)
}

/// The registry's default of the setting `name` (null for an unknown key).
pub fn default_of(name: &str) -> Value {
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
        "data.replica_max_lag_ms" => json!(1_000),
        "auth.oauth" => OAUTH_PROVIDERS
            .iter()
            .map(|p| (p.to_string(), oauth_default(p)))
            .collect::<Map<_, _>>()
            .into(),
        "auth.redirect_allow_list" | "security.cors_origins" | "auth.passkey_origins" => {
            json!([])
        }
        "workflows.max_sync_wait_ms" | "sql_console.timeout_ms" => json!(30_000),
        "workflows.public_rate_limit_per_minute" => json!(60),
        "workflows.run_retention_days" => json!(30),
        "workflows.hook_timeout_ms" => json!(2_000),
        "workflows.script_concurrency" => json!(
            std::thread::available_parallelism()
                .map(|n| n.get().min(64))
                .unwrap_or(1)
        ),
        "files.max_bytes" => json!(26_214_400),
        "data.import_max_bytes" => json!(104_857_600),
        "data.max_answer_bytes" => json!(33_554_432),
        "realtime.replay_seconds" => json!(300),
        "realtime.max_subscribers" => json!(10_000),
        "auth.registration_enabled"
        | "auth.email_verification_required"
        | "auth.mfa_required_for_admins"
        | "auth.email_code_enabled"
        | "workflows.http_allow_private"
        | "mcp.enabled"
        | "sql_console.allow_api_tokens" => json!(false),
        _ => Value::Null,
    }
}

/// Whether `name` is a setting only an administrator signed in with a
/// session may change.
pub fn session_only(name: &str) -> bool {
    KEYS.iter().any(|k| k.session_only && k.name == name)
}
