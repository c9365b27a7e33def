//! `{{path}}` templates: a string that is exactly one `{{path}}` takes the
//! value at the path with its JSON type; inside a longer string the value is
//! interpolated as text. A path that leads nowhere is null (empty in text).

use serde_json::{Map, Value};

/// The `{{path}}`s of a template string, trimmed, in order.
fn string_paths(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = s;
    std::iter::from_fn(move || {
        let start = rest.find("{{")?;
        let end = rest[start + 2..].find("}}")?;
        let path = rest[start + 2..start + 2 + end].trim();
        rest = &rest[start + 2 + end + 2..];
        Some(path)
    })
}

/// Every `{{path}}` in `value`, at any depth (object keys included).
pub fn paths(value: &Value) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        Value::String(s) => Box::new(string_paths(s)),
        Value::Array(items) => Box::new(items.iter().flat_map(paths)),
        Value::Object(map) => Box::new(
            map.iter()
                .flat_map(|(key, value)| string_paths(key).chain(paths(value))),
        ),
        _ => Box::new(std::iter::empty()),
    }
}

/// The value at a dotted `path` of `context` (numeric segments index arrays).
pub fn lookup<'a>(context: &'a Value, path: &str) -> Option<&'a Value> {
    descend(context, path.split('.'))
}

/// The value reached from `at` by `segments`.
pub(crate) fn descend<'a, 's>(
    at: &'a Value,
    mut segments: impl Iterator<Item = &'s str>,
) -> Option<&'a Value> {
    segments.try_fold(at, |at, segment| match at {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// What templates read: a JSON context, or the layered scope of a run
/// (a loop's iteration over the run's context).
pub trait Context: Sync {
    /// The value at a dotted `path`.
    fn value_at(&self, path: &str) -> Option<&Value>;
}

impl Context for Value {
    fn value_at(&self, path: &str) -> Option<&Value> {
        lookup(self, path)
    }
}

/// The whole-string template's path, when `s` is exactly one `{{path}}`.
fn sole_path(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

fn as_text(value: Option<&Value>, out: &mut String) {
    match value {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => out.push_str(s),
        Some(other) => out.push_str(&other.to_string()),
    }
}

fn render_string<C: Context + ?Sized>(s: &str, context: &C) -> Value {
    if !s.contains("{{") {
        return Value::String(s.to_owned());
    }
    if let Some(path) = sole_path(s) {
        return context.value_at(path).cloned().unwrap_or(Value::Null);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(end) = rest[start + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        as_text(
            context.value_at(rest[start + 2..start + 2 + end].trim()),
            &mut out,
        );
        rest = &rest[start + 2 + end + 2..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// `value` with every template rendered against `context`.
pub fn render<C: Context + ?Sized>(value: &Value, context: &C) -> Value {
    match value {
        Value::String(s) => render_string(s, context),
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, context)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let key = match render_string(key, context) {
                        Value::String(k) => k,
                        other => other.to_string(),
                    };
                    (key, render(value, context))
                })
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_sole_template_keeps_the_type_and_others_interpolate() {
        let ctx = json!({ "start": { "data": { "body": { "n": 5, "name": "Ada", "tags": ["a", "b"], "none": null } } } });
        assert_eq!(render(&json!("{{start.data.body.n}}"), &ctx), json!(5));
        assert_eq!(
            render(&json!("{{ start.data.body.tags }}"), &ctx),
            json!(["a", "b"])
        );
        assert_eq!(
            render(&json!("{{start.data.body.tags.1}}"), &ctx),
            json!("b")
        );
        assert_eq!(
            render(&json!("{{start.data.body.missing}}"), &ctx),
            Value::Null
        );
        assert_eq!(
            render(
                &json!(
                    "Hi {{start.data.body.name}} ({{start.data.body.n}}){{start.data.body.none}}{{nope}}"
                ),
                &ctx
            ),
            json!("Hi Ada (5)")
        );
        assert_eq!(
            render(
                &json!({ "list": ["{{start.data.body.n}}", 1], "{{start.data.body.name}}": true }),
                &ctx
            ),
            json!({ "list": [5, 1], "Ada": true })
        );
        assert_eq!(render(&json!("{{unclosed"), &ctx), json!("{{unclosed"));
        assert_eq!(render(&json!("{{a}} and {{b"), &ctx), json!(" and {{b"));
    }

    #[test]
    fn lists_paths_everywhere() {
        let value = json!({ "{{k}}": ["x {{a.b}} y {{ c }}", { "d": "{{d}}" }], "n": 1 });
        let found: Vec<&str> = paths(&value).collect();
        assert_eq!(found, ["k", "a.b", "c", "d"]);
    }

    /// Any template over any context renders without a panic, and a
    /// template without placeholders renders as itself.
    mod fuzz {
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::super::render;

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop::sample::select(vec![
                    "{{",
                    "}}",
                    "start",
                    ".",
                    "data",
                    "body",
                    "x",
                    "0",
                    "[0]",
                    "{{start.data.body.x}}",
                    " ",
                    "}",
                    "{",
                    "\\",
                    "{{a.b.c.d}}",
                    "é",
                ]),
                0..10,
            )
            .prop_map(|parts| parts.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]
            #[test]
            fn renders_anything(template in text(), deep in text()) {
                let context = json!({ "start": { "data": { "body": { "x": deep, "list": [1, {"a": null}] } } } });
                let _ = render(&Value::String(template.clone()), &context);
                let _ = render(&json!({ "k": [template.clone(), { "n": template.clone() }] }), &context);
                if !template.contains("{{") {
                    prop_assert_eq!(render(&Value::String(template.clone()), &context), Value::String(template));
                }
            }
        }
    }
}
