//! The sandbox's rules, run for real in QuickJS.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{LOG_LINES_MAX, Limits, ScriptError, check, compile, run};

const LIMITS: Limits = Limits {
    timeout: Duration::from_millis(1000),
    memory_bytes: 16 << 20,
};

fn result(code: &str, input: Value) -> Result<Value, ScriptError> {
    run(code, &input, LIMITS, Instant::now()).result
}

#[test]
fn the_default_export_is_called_with_the_context_and_its_value_is_json() {
    let sum =
        "export default function (ctx) { return ctx.steps.q.result.reduce((a, b) => a + b, 0) }";
    let numbers: Vec<u32> = (1..=100).collect();
    assert_eq!(
        result(sum, json!({ "steps": { "q": { "result": numbers } } })),
        Ok(json!(5050))
    );
    let asynchronous = "export default async function (ctx) { const n = await Promise.resolve(ctx.n); return { twice: n * 2 } }";
    assert_eq!(
        result(asynchronous, json!({ "n": 4 })),
        Ok(json!({ "twice": 8 }))
    );
    assert_eq!(
        result("export default () => undefined", json!({})),
        Ok(Value::Null)
    );
}

#[test]
fn throws_keep_an_upper_snake_code_and_the_rest_is_script_error() {
    let coded = "export default () => { throw { code: 'OUT_OF_STOCK', message: 'only 2 left' } }";
    assert_eq!(
        result(coded, json!({})),
        Err(ScriptError::Thrown {
            code: "OUT_OF_STOCK".into(),
            message: "only 2 left".into()
        })
    );
    let error =
        "export default () => { const e = new Error('no VAT'); e.code = 'BAD_VAT'; throw e }";
    assert_eq!(result(error, json!({})).unwrap_err().code(), "BAD_VAT");
    for code in [
        "export default () => { throw new Error('plain') }",
        "export default () => { throw { code: 'lower', message: 'x' } }",
        "export default () => { throw 'text' }",
        "export default () => { const a = {}; a.a = a; return a }",
        "export default () => 10n",
        "export default () => { function f() { return f() } return f() }",
        "export default async () => { await new Promise(() => {}) }",
    ] {
        let refused = result(code, json!({})).unwrap_err();
        assert_eq!(refused.code(), "SCRIPT_ERROR", "{code}: {refused:?}");
    }
}

#[test]
fn an_endless_loop_and_an_allocation_bomb_stop_at_their_limits() {
    let started = Instant::now();
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..LIMITS
    };
    let endless = run(
        "export default () => { for (;;) {} }",
        &json!({}),
        limits,
        started,
    );
    assert_eq!(endless.result, Err(ScriptError::Timeout));
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
    let bomb =
        "export default () => { const a = []; for (;;) a.push('x'.repeat(1000) + a.length) }";
    assert_eq!(result(bomb, json!({})), Err(ScriptError::Memory));
    assert_eq!(
        result(
            "export default () => 'x'.repeat(64 * 1024 * 1024)",
            json!({})
        ),
        Err(ScriptError::Memory)
    );
    assert_eq!(
        result("export default () => 1", json!({})),
        Ok(json!(1)),
        "the next run works"
    );
}

#[test]
fn nothing_of_the_host_is_there() {
    let seen = "export default () => [typeof fetch, typeof require, typeof process, typeof Deno, \
        typeof setTimeout, typeof setInterval, typeof XMLHttpRequest, typeof std, typeof os]";
    assert_eq!(result(seen, json!({})), Ok(json!(vec!["undefined"; 9])));
    let dynamic = "export default async () => { await import('os'); return 'imported' }";
    assert_eq!(
        result(dynamic, json!({})).unwrap_err().code(),
        "SCRIPT_ERROR"
    );
    assert!(check("import * as os from 'os'; export default () => 1", LIMITS).is_err());
}

#[test]
fn logs_are_kept_within_their_limits() {
    let outcome = run(
        "export default () => { console.log('total', 3, { a: 1 }); for (let i = 0; i < 500; i++) console.log(i); return 1 }",
        &json!({}),
        LIMITS,
        Instant::now(),
    );
    assert_eq!(outcome.logs[0], "total 3 {\"a\":1}");
    assert_eq!(outcome.logs.len(), LOG_LINES_MAX);
    let long = run(
        "export default () => { for (;;) { console.log('y'.repeat(3000)); if (Math.random() > 2) break } }",
        &json!({}),
        Limits {
            timeout: Duration::from_millis(100),
            ..LIMITS
        },
        Instant::now(),
    );
    assert_eq!(
        long.logs.iter().map(String::len).sum::<usize>(),
        crate::LOG_CHARS_MAX
    );
}

#[test]
fn a_module_is_checked_before_it_is_saved() {
    assert!(check("export default function (ctx) { return 1 }", LIMITS).is_ok());
    let syntax = check("export default function ( { return", LIMITS).unwrap_err();
    assert!(!syntax.is_empty());
    let none = check("export const x = 1", LIMITS).unwrap_err();
    assert!(none.contains("default export"), "{none}");
    assert!(check("export default 5", LIMITS).is_err());
    assert!(
        check(
            "for (;;) {} export default () => 1",
            Limits {
                timeout: Duration::from_millis(100),
                ..LIMITS
            }
        )
        .is_err()
    );
}

#[test]
fn jobs_that_queue_jobs_stop_at_the_deadline_and_logs_may_nest() {
    let started = Instant::now();
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..LIMITS
    };
    let chained = "const g = () => { Promise.resolve().then(g); for (;;) {} }; \
        export default () => { Promise.resolve().then(g); return new Promise(() => {}) }";
    assert_eq!(
        run(chained, &json!({}), limits, started).result,
        Err(ScriptError::Timeout)
    );
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    let top = "const g = () => { Promise.resolve().then(g); for (;;) {} }; Promise.resolve().then(g); \
        await new Promise(() => {}); export default () => 1";
    let started = Instant::now();
    assert!(check(top, limits).is_err());
    assert!(started.elapsed() < Duration::from_millis(800));
    assert!(compile(top).is_ok(), "compiling runs none of it");
    assert!(compile("export default function ( {").is_err());
    let nested = run(
        "export default () => { console.log({ toJSON() { console.log('inner'); return 1 } }); return 2 }",
        &json!({}),
        LIMITS,
        Instant::now(),
    );
    assert_eq!(nested.result, Ok(json!(2)));
    assert_eq!(nested.logs, ["inner", "1"]);
    let large = result(
        "export default () => 'x'.repeat(2 * 1024 * 1024)",
        json!({}),
    );
    assert_eq!(large.unwrap_err().code(), "SCRIPT_ERROR");
}

#[test]
fn runs_on_one_thread_share_no_globals_and_a_runtime_past_its_limits_is_not_kept() {
    // Control: the first run sees its own global.
    let set = "export default () => { globalThis.left = 41; Object.prototype.polluted = 1; return left + 1 }";
    assert_eq!(result(set, json!({})), Ok(json!(42)));
    let read = "export default () => [typeof globalThis.left, typeof ({}).polluted]";
    assert_eq!(
        result(read, json!({})),
        Ok(json!(["undefined", "undefined"]))
    );
    // A run stopped at its memory is followed by one that runs as usual.
    let bomb = "export default () => { const a = []; for (;;) a.push(new Array(1e5).fill(1)) }";
    assert_eq!(result(bomb, json!({})), Err(ScriptError::Memory));
    assert_eq!(
        result("export default () => 1 + 1", json!({})),
        Ok(json!(2))
    );
}
