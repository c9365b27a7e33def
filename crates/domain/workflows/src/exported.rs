//! A definition's own secrets in snapshots (API.md 17 and 21): an http
//! step's `signingSecret`, the values of its credential headers and the
//! credentials of its URL (the user-info password, credential query
//! parameters) leave an export as `[REDACTED]`; a `[REDACTED]` applied
//! keeps the value the target has for that step.

use kernel::FieldError;
use serde_json::Value;

use crate::redact::{MARK, is_credential_header, redacted_url, url_pieces};

/// Every http step of `definition`, at any depth (conditions, loops, error
/// branches), with its secrets replaced by `[REDACTED]`.
pub fn redact_secrets(definition: &mut Value) {
    for_each_http_step(definition, String::new(), &mut |_, step| {
        for (_, secret) in secrets_mut(step) {
            *secret = Value::String(MARK.into());
        }
        if let Some(Value::String(url)) = step.get_mut("url") {
            *url = redacted_url(url);
        }
    });
}

/// Puts back, in each http step of `definition` that carries `[REDACTED]`,
/// the value of the same step in `stored` (the target's current
/// definition): an http step at the same place, with the same id, method
/// and URL, so that a secret never follows a step sent elsewhere. Refused
/// at `path` when the target has no such step.
pub fn restore_secrets(
    definition: &mut Value,
    stored: Option<&Value>,
    path: &str,
) -> Result<(), FieldError> {
    let mut missing = None;
    for_each_http_step(definition, String::new(), &mut |at, step| {
        let kept = stored
            .and_then(|s| s.pointer(at))
            .filter(|kept| same_call(kept, step));
        let id = step
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(Value::String(url)) = step.get_mut("url")
            && url_pieces(url)
                .iter()
                .any(|&(piece, secret)| secret && piece == MARK)
        {
            match kept.and_then(|k| restored_url(url, k)) {
                Some(restored) => *url = restored,
                None if missing.is_none() => missing = Some(format!("{path}.steps.{id}.url")),
                None => {}
            }
        }
        for (name, secret) in secrets_mut(step) {
            if secret.as_str() != Some(MARK) {
                continue;
            }
            match kept.and_then(|k| secret_of(k, &name)) {
                Some(value) => *secret = value,
                None if missing.is_none() => {
                    missing = Some(format!("{path}.steps.{id}.{name}"));
                }
                None => {}
            }
        }
    });
    match missing {
        Some(field) => Err(FieldError::new(
            field,
            "is [REDACTED] but this instance has no value to keep for it \
             (no http step here with this id, method and url, or a url whose host \
             is a template): give the value",
        )),
        None => Ok(()),
    }
}

/// The keys of a step (and of a definition) that hold lists of steps.
const STEP_LISTS: [&str; 4] = ["steps", "then", "else", "onError"];

/// Calls `visit` on every http step in the step lists of `node` (a
/// definition or a step at JSON pointer `at`), with its pointer; values
/// that are not steps (inputs, templates, bodies) are never looked into.
fn for_each_http_step(node: &mut Value, at: String, visit: &mut impl FnMut(&str, &mut Value)) {
    let Value::Object(map) = node else {
        return;
    };
    for key in STEP_LISTS {
        if let Some(Value::Array(steps)) = map.get_mut(key) {
            for (i, step) in steps.iter_mut().enumerate() {
                let here = format!("{at}/{key}/{i}");
                if step.get("type").and_then(Value::as_str) == Some("http") {
                    visit(&here, step);
                }
                for_each_http_step(step, here, visit);
            }
        }
    }
}

/// Whether `stored` is the http step `step` with the same id, method and
/// URL (but for the URL's credentials), and that URL names its host
/// outright.
fn same_call(stored: &Value, step: &Value) -> bool {
    let shown = |step: &Value| step.get("url").and_then(Value::as_str).map(redacted_url);
    stored.get("type").and_then(Value::as_str) == Some("http")
        && ["id", "method"]
            .iter()
            .all(|key| stored.get(key) == step.get(key))
        && shown(stored).is_some()
        && shown(stored) == shown(step)
        && step
            .get("url")
            .and_then(Value::as_str)
            .is_some_and(written_host)
}

/// Whether `url` writes its scheme, host and port with no template: a
/// host taken from an input or an earlier step could send the same step,
/// unchanged, elsewhere once other steps change. What precedes the first
/// template must be `http(s)://host[:port]` then the end or `/`, `?`, `#`,
/// with no backslash, space or control character anywhere before it (URL
/// parsers skip or drop those, which would let a template name the host).
fn written_host(url: &str) -> bool {
    let fixed = url.split("{{").next().unwrap_or_default();
    if fixed
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return false;
    }
    let lower = fixed.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    else {
        return false;
    };
    // The authority ends inside the written part: at `/`, `?` or `#`, or
    // at the end of a URL with no template.
    let end = match rest.find(['/', '?', '#']) {
        Some(end) => end,
        None if fixed.len() == url.len() => rest.len(),
        None => return false,
    };
    // A written user-info part (its password exported as [REDACTED]) is
    // no part of the host: URL parsers end it at the last `@`.
    let authority = rest[..end]
        .rsplit_once('@')
        .map_or(&rest[..end], |(_, host)| host);
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((address, "")) if !address.is_empty() => (address, ""),
            Some((address, port)) if !address.is_empty() && port.starts_with(':') => {
                (address, &port[1..])
            }
            _ => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, port),
            None => (authority, ""),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
    let port_ok = port.is_empty()
        || ((1..=5).contains(&port.len()) && port.chars().all(|c| c.is_ascii_digit()));
    host_ok && port_ok && (authority.starts_with('[') || !host.contains(':'))
}

/// `url` with each credential it carries as `[REDACTED]` taken from the
/// URL of `stored` (the same call); none when the two do not line up.
fn restored_url(url: &str, stored: &Value) -> Option<String> {
    let kept = url_pieces(stored.get("url")?.as_str()?);
    let given = url_pieces(url);
    if kept.len() != given.len() {
        return None;
    }
    let mut restored = String::with_capacity(url.len());
    for (&(piece, secret), &(old, _)) in given.iter().zip(&kept) {
        if secret && piece == MARK {
            if old == MARK {
                return None;
            }
            restored.push_str(old);
        } else {
            restored.push_str(piece);
        }
    }
    Some(restored)
}

/// A step's secrets, named `signingSecret` or `headers.<name>`.
fn secrets_mut(step: &mut Value) -> Vec<(String, &mut Value)> {
    let Value::Object(map) = step else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (key, value) in map.iter_mut() {
        if key == "signingSecret" && value.is_string() {
            found.push((key.clone(), value));
        } else if key == "headers"
            && let Value::Object(headers) = value
        {
            for (name, header) in headers.iter_mut() {
                if is_credential_header(name) && !header.is_null() {
                    found.push((format!("headers.{name}"), header));
                }
            }
        }
    }
    found
}

/// The secret `name` (as [`secrets_mut`] names it) of a stored step; a
/// header is matched whatever its case.
fn secret_of(step: &Value, name: &str) -> Option<Value> {
    let value = match name.strip_prefix("headers.") {
        Some(header) => step
            .get("headers")?
            .as_object()?
            .iter()
            .find_map(|(n, v)| n.eq_ignore_ascii_case(header).then_some(v))?,
        None => step.get(name)?,
    };
    (!value.is_null() && value.as_str() != Some(MARK)).then(|| value.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn definition(secret: &str, auth: &str) -> Value {
        json!({ "trigger": { "type": "webhook" }, "steps": [
            { "id": "c", "type": "condition", "if": {}, "then": [
                { "id": "call", "type": "http", "method": "POST", "url": "https://x.test",
                  "signingSecret": secret,
                  "headers": { "Authorization": auth, "Accept": "application/json" } }
            ], "else": [] }] })
    }

    #[test]
    fn exports_carry_no_secret_and_applies_keep_the_stored_one() {
        let stored = definition("s3cret", "Bearer t0ken");
        let mut exported = stored.clone();
        redact_secrets(&mut exported);
        let call = &exported["steps"][0]["then"][0];
        assert_eq!(call["signingSecret"], "[REDACTED]");
        assert_eq!(call["headers"]["Authorization"], "[REDACTED]");
        assert_eq!(call["headers"]["Accept"], "application/json");
        let mut applied = exported.clone();
        restore_secrets(&mut applied, Some(&stored), "workflows[0].draft").unwrap();
        assert_eq!(applied, stored);
        // A new value is taken as given.
        let mut changed = definition("new", "Bearer t0ken");
        restore_secrets(&mut changed, Some(&stored), "w").unwrap();
        assert_eq!(changed["steps"][0]["then"][0]["signingSecret"], "new");
        // A step sent elsewhere, or an http-looking value that is not a
        // step, gets nothing.
        let mut moved = exported.clone();
        moved["steps"][0]["then"][0]["url"] = json!("https://attacker.test");
        let refused = restore_secrets(&mut moved, Some(&stored), "w").unwrap_err();
        assert_eq!(refused.field, "w.steps.call.headers.Authorization");
        let mut smuggled = json!({ "steps": [{ "id": "t", "type": "transform", "output": {
            "x": { "id": "call", "type": "http", "signingSecret": "[REDACTED]" } } }] });
        restore_secrets(&mut smuggled, Some(&stored), "w").unwrap();
        assert_eq!(
            smuggled["steps"][0]["output"]["x"]["signingSecret"],
            "[REDACTED]"
        );
        // A step whose host is a template (an input or an earlier step's
        // output, which a snapshot can change) gets nothing, even unchanged.
        for url in [
            "https://{{input.host}}/hook",
            "{{input.url}}",
            "https://a.test{{x}}",
            "https://a.test:{{x}}/",
            "https://\\/{{input.host}}/p",
            "https://\t/{{input.host}}/p",
            "https://user@{{x}}/",
            "https:/{{x}}",
            "//{{x}}/p",
        ] {
            let mut templated = stored.clone();
            templated["steps"][0]["then"][0]["url"] = json!(url);
            let mut applied = templated.clone();
            redact_secrets(&mut applied);
            assert!(
                restore_secrets(&mut applied, Some(&templated), "w").is_err(),
                "{url}"
            );
        }
        for url in [
            "https://x.test/{{input.id}}?q={{input.q}}",
            "HTTP://X.test:8443?q={{input.q}}",
            "https://[::1]:8080/{{input.id}}",
        ] {
            let mut path_only = stored.clone();
            path_only["steps"][0]["then"][0]["url"] = json!(url);
            let mut applied = path_only.clone();
            redact_secrets(&mut applied);
            restore_secrets(&mut applied, Some(&path_only), "w").unwrap();
            assert_eq!(applied, path_only, "{url}");
        }
        // The credentials of a URL and of any header naming one.
        let mut keyed = stored.clone();
        let call = &mut keyed["steps"][0]["then"][0];
        call["url"] = json!("https://bot:pw@x.test/hook?Token=t-1&page=2&api_key=k-2");
        call["headers"]["X-Auth-Token"] = json!("xt");
        let mut exported_keyed = keyed.clone();
        redact_secrets(&mut exported_keyed);
        let call = &exported_keyed["steps"][0]["then"][0];
        assert_eq!(
            call["url"],
            "https://bot:[REDACTED]@x.test/hook?Token=[REDACTED]&page=2&api_key=[REDACTED]"
        );
        assert_eq!(call["headers"]["X-Auth-Token"], "[REDACTED]");
        assert_eq!(call["headers"]["Accept"], "application/json");
        let mut applied = exported_keyed.clone();
        restore_secrets(&mut applied, Some(&keyed), "w").unwrap();
        assert_eq!(applied, keyed);
        // A URL changed elsewhere than its credentials is another call.
        let mut elsewhere = exported_keyed.clone();
        elsewhere["steps"][0]["then"][0]["url"] =
            json!("https://bot:[REDACTED]@x.test/hook?Token=[REDACTED]&page=3&api_key=[REDACTED]");
        assert!(restore_secrets(&mut elsewhere, Some(&keyed), "w").is_err());
        // A target without the step refuses the mark.
        let refused = restore_secrets(&mut exported, None, "workflows[0].draft").unwrap_err();
        assert_eq!(
            refused.field,
            "workflows[0].draft.steps.call.headers.Authorization"
        );
    }
}
