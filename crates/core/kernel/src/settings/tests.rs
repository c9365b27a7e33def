use serde_json::{Value, json};

use super::{Settings, SettingsPatch};
use crate::error::FieldError;
use crate::id::USERS_ROLE_ID;

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
    assert!(patch(json!({ "auth.passkey_origins": ["https://a.example", "*"] })).is_err());
    assert!(patch(json!({ "auth.passkey_origins": ["http://localhost:8080"] })).is_ok());
    for good in ["localhost", "Example.COM", "id.example-1.org"] {
        let value =
            &patch(json!({ "auth.passkey_rp_id": good })).unwrap().values["auth.passkey_rp_id"];
        assert_eq!(value, &json!(good.to_ascii_lowercase()));
    }
    for bad in [
        "127.0.0.1",
        "",
        "a..b",
        "-a.example",
        "example.com:80",
        "https://example.com",
    ] {
        assert!(
            patch(json!({ "auth.passkey_rp_id": bad })).is_err(),
            "{bad}"
        );
    }
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
