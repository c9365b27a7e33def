//! A change of settings, validated key by key against the registry.

use serde_json::{Map, Value, json};

use super::Settings;
use super::registry::{KEYS, Key, OAUTH_PROVIDERS, Rule, oauth_default, oauth_fields};
use crate::error::FieldError;
use crate::validate::TimeZoneName;

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
        Rule::OptionalDomain => match value {
            Value::Null => Ok(Value::Null),
            Value::String(s) if is_domain(s) => Ok(json!(s.to_ascii_lowercase())),
            _ => fail("must be a domain name such as example.com (not an IP address), or null"),
        },
        Rule::Origins { wildcard } => {
            let Some(items) = value.as_array() else {
                return fail("must be an array of origins");
            };
            if items.len() > 100 {
                return fail("must have at most 100 origins");
            }
            let mut origins = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some("*") if wildcard => origins.push(json!("*")),
                    Some(s) if is_origin(s) => origins.push(json!(s.trim_end_matches('/'))),
                    _ if wildcard => {
                        return fail(
                            "each entry must be an origin such as https://app.example.com, or *",
                        );
                    }
                    _ => {
                        return fail(
                            "each entry must be an origin such as https://app.example.com",
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
                ("enabled" | "trustEmail", Value::Bool(_)) | (_, Value::Null) => true,
                ("enabled" | "trustEmail", _) => false,
                ("clientId" | "clientSecret", Value::String(s)) => s.len() <= 512,
                (_, Value::String(s)) => is_http_url(s),
                _ => false,
            };
            if !ok {
                return Err(FieldError::new(path, "has a wrong type or value"));
            }
            // A write-only secret sent back as null keeps the stored one;
            // a null `trustEmail` is its default, false.
            if matches!(name.as_str(), "clientSecret" | "trustEmail") && v.is_null() {
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

/// A DNS name of labels of letters, digits and inner hyphens, with a
/// letter in its last label (so no IP address).
fn is_domain(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    s.len() <= 253
        && labels.iter().all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && labels
            .last()
            .is_some_and(|l| l.bytes().any(|b| b.is_ascii_alphabetic()))
}
