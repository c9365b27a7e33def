//! The providers and their settings (`auth.oauth`, API.md sections 2 and 3a).

use kernel::settings::Settings;
use serde_json::Value;

/// A provider one can sign in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Google accounts (OAuth 2.0 with its userinfo endpoint).
    Google,
    /// GitHub or GitHub Enterprise (OAuth 2.0 with its REST API).
    Github,
    /// Any OpenID Connect issuer, found by discovery.
    Oidc,
}

impl Provider {
    /// Every provider, in the order the sign-in page shows them.
    pub const ALL: [Provider; 3] = [Provider::Google, Provider::Github, Provider::Oidc];

    /// The provider of a route segment.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Its name in routes, settings and `svc.user_identities`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Google => "google",
            Provider::Github => "github",
            Provider::Oidc => "oidc",
        }
    }
}

/// An enabled provider's settings, with the public endpoints filled in where
/// no override is set.
#[derive(Debug, Clone)]
pub(crate) struct ProviderConfig {
    pub client_id: String,
    pub client_secret: Option<String>,
    pub authorize_url: String,
    pub token_url: String,
    /// Google's userinfo endpoint.
    pub userinfo_url: String,
    /// GitHub's REST API base.
    pub api_url: String,
    /// The OIDC issuer.
    pub issuer: String,
    /// Whether an email the provider does not say is verified counts as
    /// verified (`trustEmail`; an explicit `false` is refused all the same).
    pub trust_email: bool,
}

impl ProviderConfig {
    /// The settings of `provider` when it is enabled and has what it needs
    /// (a client id, and for OIDC an issuer); `None` otherwise.
    pub fn of(settings: &Settings, provider: Provider) -> Option<Self> {
        let fields = &settings.value("auth.oauth")[provider.as_str()];
        if fields["enabled"] != Value::Bool(true) {
            return None;
        }
        let text = |name: &str| fields[name].as_str().map(str::to_owned);
        let or = |name: &str, default: &str| text(name).unwrap_or_else(|| default.to_owned());
        let (authorize, token, userinfo) = match provider {
            Provider::Google => (
                "https://accounts.google.com/o/oauth2/v2/auth",
                "https://oauth2.googleapis.com/token",
                "https://openidconnect.googleapis.com/v1/userinfo",
            ),
            Provider::Github => (
                "https://github.com/login/oauth/authorize",
                "https://github.com/login/oauth/access_token",
                "",
            ),
            Provider::Oidc => ("", "", ""),
        };
        let config = Self {
            client_id: text("clientId")?,
            client_secret: text("clientSecret"),
            authorize_url: or("authorizeUrl", authorize),
            token_url: or("tokenUrl", token),
            userinfo_url: or("userinfoUrl", userinfo),
            api_url: or("apiUrl", "https://api.github.com"),
            issuer: text("issuer").unwrap_or_default(),
            trust_email: fields["trustEmail"] == Value::Bool(true),
        };
        (provider != Provider::Oidc || !config.issuer.is_empty()).then_some(config)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(oauth: Value) -> Settings {
        let mut stored = serde_json::Map::new();
        stored.insert("auth.oauth".into(), oauth);
        Settings::from_stored(stored)
    }

    #[test]
    fn names_round_trip() {
        for p in Provider::ALL {
            assert_eq!(Provider::parse(p.as_str()), Some(p));
        }
        assert_eq!(Provider::parse("GitHub"), None);
        assert_eq!(Provider::parse("facebook"), None);
    }

    #[test]
    #[allow(clippy::panic, reason = "test")]
    fn only_enabled_and_complete_providers_are_configured() {
        let s = settings(json!({
            "github": { "enabled": true, "clientId": "id", "clientSecret": "s", "apiUrl": "https://ghe.example/api/v3" },
            "google": { "enabled": false, "clientId": "id" },
            "oidc": { "enabled": true, "clientId": "id" },
        }));
        let github = ProviderConfig::of(&s, Provider::Github).unwrap_or_else(|| panic!("github"));
        assert_eq!(github.api_url, "https://ghe.example/api/v3");
        assert_eq!(
            github.token_url,
            "https://github.com/login/oauth/access_token"
        );
        assert_eq!(github.client_secret.as_deref(), Some("s"));
        assert!(ProviderConfig::of(&s, Provider::Google).is_none());
        // OIDC without an issuer cannot be used.
        assert!(ProviderConfig::of(&s, Provider::Oidc).is_none());
    }
}
