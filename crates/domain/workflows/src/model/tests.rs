use serde_json::{Value, json};
use uuid::Uuid;

use super::*;

fn hook() -> Value {
    json!({ "type": "webhook", "access": "public", "executeAs": Uuid::nil() })
}

fn refused(trigger: Value, steps: Value) -> String {
    Definition::parse(&trigger, &steps, 30_000)
        .err()
        .map(|e| e.field.into_owned())
        .unwrap_or_default()
}

#[test]
fn parses_the_example_and_fills_sync_defaults() {
    let steps = json!([
        { "id": "greet", "type": "transform", "output": { "hello": "{{start.data.body.name}}" } },
        { "id": "done", "type": "finish", "result": "{{steps.greet.result}}" }
    ]);
    let def = Definition::parse(&hook(), &steps, 30_000).unwrap();
    assert_eq!(def.steps.len(), 2);
    let trigger = def.trigger_json();
    assert_eq!(trigger["waitSeconds"], 30);
    assert_eq!(trigger["onTimeout"], "continue");
    assert_eq!(trigger["method"], "POST");
    assert_eq!(def.steps_json(), steps);
    assert_eq!(Definition::from_stored(&def.to_json()).unwrap(), def);
    assert!(!def.reads_user());
}

#[test]
fn refuses_bad_definitions_with_their_field() {
    let t = hook;
    assert_eq!(
        refused(t(), json!([{ "id": "a", "type": "teleport" }])),
        "steps[0].type"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "a", "type": "finish" }, { "id": "a", "type": "finish" }])
        ),
        "steps[1].id"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "a", "type": "finish", "result": "{{steps.b.result}}" }, { "id": "b", "type": "finish" }])
        ),
        "steps[0].result"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "a", "type": "transform", "output": "{{steps.a.result}}" }])
        ),
        "steps[0].output"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "c", "type": "condition", "if": { "start.data.x": { "eq": 1 } },
            "then": [{ "id": "t", "type": "transform", "output": 1 }],
            "else": [{ "id": "e", "type": "finish", "result": "{{steps.t.result}}" }] }])
        ),
        "steps[0].else[0].result"
    );
    assert_eq!(
        refused(json!({ "type": "webhook", "access": "public" }), json!([])),
        "trigger.executeAs"
    );
    assert_eq!(
        refused(
            json!({ "type": "webhook", "access": "authenticated", "waitSeconds": 31 }),
            json!([])
        ),
        "trigger.waitSeconds"
    );
    assert_eq!(
        refused(
            json!({ "type": "webhook", "access": "authenticated", "response": "async", "onTimeout": "cancel" }),
            json!([])
        ),
        "trigger.onTimeout"
    );
    assert_eq!(
        refused(
            json!({ "type": "webhook", "access": "authenticated", "method": "PUT" }),
            json!([])
        ),
        "trigger.method"
    );
    assert_eq!(
        refused(json!({ "type": "cron" }), json!([])),
        "trigger.type"
    );
    assert_eq!(
        refused(
            json!({ "type": "dbEvent", "resourceId": Uuid::nil(), "events": [] }),
            json!([])
        ),
        "trigger.events"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "q", "type": "query", "resource": "orders" }])
        ),
        "steps[0].resource"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "h", "type": "http", "url": "ftp://x" }])
        ),
        "steps[0].url"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "h", "type": "transform", "output": 1, "extra": 2 }])
        ),
        "steps[0].extra"
    );
    assert_eq!(
        refused(t(), json!([{ "id": "d", "type": "delay", "ms": -1 }])),
        "steps[0].ms"
    );
    assert_eq!(
        refused(t(), json!([{ "id": "f", "type": "fail", "code": "lower" }])),
        "steps[0].code"
    );
    assert_eq!(
        refused(
            t(),
            json!([{ "id": "x", "type": "finish", "result": "{{env.HOME}}" }])
        ),
        "steps[0].result"
    );
}

#[test]
fn steps_after_a_condition_may_read_its_branches() {
    let steps = json!([
        { "id": "c", "type": "condition", "if": { "start.data.body.n": { "gt": 1 } },
          "then": [{ "id": "big", "type": "transform", "output": "big" }],
          "else": [{ "id": "small", "type": "transform", "output": "{{steps.c.result}}" }] },
        { "id": "done", "type": "finish", "result": ["{{steps.big.result}}", "{{steps.small.result}}", "{{user.email}}"] }
    ]);
    let def = Definition::parse(&hook(), &steps, 30_000).unwrap();
    assert!(def.reads_user());
}

/// Any JSON as a trigger and steps: a definition or a refusal naming a
/// field, never a panic.
mod fuzz {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::super::Definition;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            prop::sample::select(vec![
                "webhook",
                "db_event",
                "POST",
                "GET",
                "public",
                "authenticated",
                "sync",
                "async",
                "transform",
                "condition",
                "finish",
                "http",
                "query",
                "insert",
                "update",
                "delete",
                "{{start.data.body.x}}",
                "{{a}}",
                "app.t",
                "insert",
                "x",
                "",
            ])
            .prop_map(|s| Value::String(s.to_owned())),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec![
                        "type", "id", "method", "access", "mode", "result", "steps", "then",
                        "else", "if", "resource", "data", "filter", "url", "table", "events",
                        "slug", "next",
                    ])
                    .prop_map(str::to_owned),
                    inner,
                    0..5,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn never_panics(trigger in json(), steps in json()) {
            if let Err(refused) = Definition::parse(&trigger, &steps, 30_000) {
                prop_assert!(!refused.field.is_empty());
            }
        }
    }
}
