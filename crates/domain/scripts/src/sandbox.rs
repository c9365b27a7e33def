//! One script in a QuickJS runtime of its own: compiled as a module, its
//! default export called with the context, its promise driven to the end,
//! its value turned into JSON, all under the run's deadline and memory.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use rquickjs::function::Rest;
use rquickjs::{
    CatchResultExt, CaughtError, Context, Ctx, Function, Module, Object, Promise, Runtime, Value,
};
use serde_json::Value as Json;

use crate::{LOG_CHARS_MAX, LOG_LINES_MAX, Limits, Outcome, ScriptError};

/// The module's name in stack traces.
const MODULE: &str = "script";
/// The stack a script may use (deep recursion is a RangeError).
const STACK_BYTES: usize = 256 * 1024;
/// The heap a compile may use.
const COMPILE_MEMORY_BYTES: usize = 16 << 20;
/// The longest a compile may take.
const COMPILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// The largest result a run answers, as JSON text.
pub const RESULT_MAX_BYTES: usize = 1 << 20;
/// The longest message a thrown error keeps, in characters.
const MESSAGE_MAX_CHARS: usize = 1000;

/// `console.log` lines kept, within the limits.
#[derive(Default)]
struct Logs {
    lines: Vec<String>,
    chars: usize,
}

impl Logs {
    /// Whether no further line is kept.
    fn full(&self) -> bool {
        self.lines.len() >= LOG_LINES_MAX || self.chars >= LOG_CHARS_MAX
    }

    fn push(&mut self, line: String) {
        if self.full() {
            return;
        }
        let room = LOG_CHARS_MAX - self.chars;
        let kept: String = line.chars().take(room).collect();
        self.chars += kept.chars().count();
        self.lines.push(kept);
    }
}

thread_local! {
    /// The runtime this thread's last run ended with normally, kept for
    /// its next one. Runs never share a context (each gets a new one, so
    /// nothing a script leaves in its globals reaches another); only the
    /// runtime's allocator, atoms and shapes are reused, collected first.
    static SPARE: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

/// Keeps `runtime` for this thread's next run, its garbage collected.
fn spare(runtime: Runtime) {
    runtime.run_gc();
    SPARE.with(|kept| *kept.borrow_mut() = Some(runtime));
}

/// A runtime with the limits (this thread's spare one, or a new one) and a
/// new context with ECMAScript only (no module loader: `import` finds
/// nothing).
fn sandbox(limits: &Limits, started: Instant) -> Result<(Runtime, Context), ScriptError> {
    let failed = |e: rquickjs::Error| ScriptError::Failed(e.to_string());
    let runtime = match SPARE.with(|kept| kept.borrow_mut().take()) {
        Some(runtime) => runtime,
        None => Runtime::new().map_err(failed)?,
    };
    runtime.set_memory_limit(limits.memory_bytes);
    runtime.set_max_stack_size(STACK_BYTES);
    let deadline = started + limits.timeout;
    runtime.set_interrupt_handler(Some(Box::new(move || Instant::now() >= deadline)));
    let context = Context::full(&runtime).map_err(|_| ScriptError::Memory)?;
    Ok((runtime, context))
}

/// Why a caught error failed the run: past the deadline, past the memory,
/// a `{ code, message }` thrown, or anything else.
fn failure(caught: CaughtError<'_>, deadline: Instant) -> ScriptError {
    if Instant::now() >= deadline {
        return ScriptError::Timeout;
    }
    let cut = |text: String| text.chars().take(MESSAGE_MAX_CHARS).collect::<String>();
    match caught_error(caught) {
        ScriptError::Thrown { code, message } => ScriptError::Thrown {
            code,
            message: cut(message),
        },
        ScriptError::Failed(message) => ScriptError::Failed(cut(message)),
        other => other,
    }
}

/// What a caught error is, its message whole.
fn caught_error(caught: CaughtError<'_>) -> ScriptError {
    match caught {
        CaughtError::Exception(exception) => {
            let message = exception.message().unwrap_or_default();
            if message.contains("out of memory") {
                return ScriptError::Memory;
            }
            let object: &Object<'_> = exception.as_object();
            let code: Option<String> = object.get("code").ok();
            match code {
                Some(code) if kernel::validate::is_code(&code) => {
                    ScriptError::Thrown { code, message }
                }
                _ if message.is_empty() => ScriptError::Failed("the script threw an error".into()),
                _ => ScriptError::Failed(message),
            }
        }
        // QuickJS throws null when even its error of an allocation past
        // the limit cannot be made (a script's own `throw null` reads the
        // same: docs/decisions.md).
        CaughtError::Value(value) if value.is_null() => ScriptError::Memory,
        CaughtError::Value(value) => thrown_value(&value),
        CaughtError::Error(rquickjs::Error::Allocation) => ScriptError::Memory,
        CaughtError::Error(error) => ScriptError::Failed(error.to_string()),
    }
}

/// A thrown value that is not an Error: `{ code, message }` keeps its
/// code; anything else is its text.
fn thrown_value(value: &Value<'_>) -> ScriptError {
    if let Some(object) = value.as_object() {
        let code: Option<String> = object.get("code").ok();
        let message: Option<String> = object.get("message").ok();
        if let Some(code) = code.filter(|c| kernel::validate::is_code(c)) {
            return ScriptError::Thrown {
                code,
                message: message.unwrap_or_default(),
            };
        }
        if let Some(message) = message {
            return ScriptError::Failed(message);
        }
    }
    let text = value
        .as_string()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| "the script threw a value that is not an Error".into());
    ScriptError::Failed(text)
}

/// Declares and evaluates the module; answers its default export.
fn default_export<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    deadline: Instant,
) -> rquickjs::CaughtResult<'js, Result<Function<'js>, String>> {
    let (module, evaluated) = Module::declare(ctx.clone(), MODULE, code)
        .catch(ctx)?
        .eval()
        .catch(ctx)?;
    match settled(ctx, &evaluated, deadline) {
        Some(done) => {
            done.catch(ctx)?;
        }
        None => {
            return Ok(Err(
                "its top level waits for a promise that never settles".into()
            ));
        }
    }
    let export: Value<'js> = module.namespace().catch(ctx)?.get("default").catch(ctx)?;
    Ok(export.into_function().ok_or_else(|| {
        "has no default export that is a function: write export default function (ctx) { ... }"
            .into()
    }))
}

/// One line of `console.log`'s arguments: strings as they are, the rest as
/// JSON (or their text when they are not JSON).
fn log_line<'js>(ctx: &Ctx<'js>, arguments: &[Value<'js>]) -> String {
    let parts: Vec<String> = arguments
        .iter()
        .map(|value| {
            if let Some(text) = value.as_string().and_then(|s| s.to_string().ok()) {
                return text;
            }
            match ctx.json_stringify(value.clone()) {
                Ok(Some(json)) => json.to_string().unwrap_or_default(),
                _ => "undefined".into(),
            }
        })
        .collect();
    parts.join(" ")
}

/// Runs `code`'s default export with `input` (the run's context) within
/// `limits`, counted from `started` (the wait for the pool included).
pub fn run(code: &str, input: &Json, limits: Limits, started: Instant) -> Outcome {
    let logs = Rc::new(RefCell::new(Logs::default()));
    let deadline = started + limits.timeout;
    let result = if Instant::now() >= deadline {
        Err(ScriptError::Timeout)
    } else {
        match sandbox(&limits, started) {
            Err(error) => Err(error),
            Ok((runtime, context)) => {
                let result = context.with(|ctx| match call(&ctx, code, input, &logs, deadline) {
                    Ok(Ok(json)) => Ok(json),
                    Ok(Err(message)) => Err(ScriptError::Failed(message)),
                    Err(caught) => Err(failure(caught, deadline)),
                });
                drop(context);
                // A runtime stopped past its time or memory is not reused.
                if !matches!(result, Err(ScriptError::Timeout | ScriptError::Memory)) {
                    spare(runtime);
                }
                result
            }
        }
    };
    let logs = logs.take().lines;
    Outcome { result, logs }
}

/// The call itself: `console.log` bound to `logs`, the module's default
/// export called, a promise driven to its end, the value as JSON.
fn call<'js>(
    ctx: &Ctx<'js>,
    code: &str,
    input: &Json,
    logs: &Rc<RefCell<Logs>>,
    deadline: Instant,
) -> rquickjs::CaughtResult<'js, Result<Json, String>> {
    let console = Object::new(ctx.clone()).catch(ctx)?;
    let kept = Rc::clone(logs);
    let log = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, arguments: Rest<Value<'js>>| {
            // Formatting may run the script's own code (toJSON), which may
            // log in turn: the lines are borrowed only to keep one.
            if kept.borrow().full() {
                return;
            }
            let line = log_line(&ctx, &arguments.0);
            kept.borrow_mut().push(line);
        },
    )
    .catch(ctx)?;
    console.set("log", log).catch(ctx)?;
    ctx.globals().set("console", console).catch(ctx)?;
    let function = match default_export(ctx, code, deadline)? {
        Ok(function) => function,
        Err(message) => return Ok(Err(message)),
    };
    let argument = ctx
        .json_parse(serde_json::to_string(input).unwrap_or_else(|_| "null".into()))
        .catch(ctx)?;
    let mut value: Value<'js> = function.call((argument,)).catch(ctx)?;
    if let Some(promise) = value.as_promise().cloned() {
        value = match settled(ctx, &promise, deadline) {
            Some(settled) => settled.catch(ctx)?,
            None => return Ok(Err("the promise it returned never settled".into())),
        };
    }
    if value.is_undefined() {
        return Ok(Ok(Json::Null));
    }
    let Some(text) = ctx.json_stringify(value).catch(ctx)? else {
        return Ok(Err(
            "its result cannot be JSON (a function or a symbol)".into()
        ));
    };
    let text = text.to_string().catch(ctx)?;
    if text.len() > RESULT_MAX_BYTES {
        return Ok(Err(format!(
            "its result is larger than {} MiB of JSON",
            RESULT_MAX_BYTES >> 20
        )));
    }
    Ok(serde_json::from_str(&text).map_err(|e| format!("its result cannot be JSON: {e}")))
}

/// The promise's value once the job queue has run it to its end; `None`
/// when nothing is left to run and it is still pending. The deadline is
/// checked between jobs: a job that queues the next one before it spins
/// is stopped by the interrupt, and the queue is not run further.
fn settled<'js>(
    ctx: &Ctx<'js>,
    promise: &Promise<'js>,
    deadline: Instant,
) -> Option<rquickjs::Result<Value<'js>>> {
    loop {
        if let Some(done) = promise.result::<Value<'js>>() {
            return Some(done);
        }
        if Instant::now() >= deadline {
            return Some(Err(rquickjs::Error::Exception));
        }
        if !ctx.execute_pending_job() {
            return None;
        }
    }
}

/// Whether `code` compiles as a module that imports nothing: what every
/// read of a definition checks (no script code runs).
pub fn compile(code: &str) -> Result<(), String> {
    let limits = Limits {
        timeout: COMPILE_TIMEOUT,
        memory_bytes: COMPILE_MEMORY_BYTES,
    };
    let started = Instant::now();
    let (_runtime, context) = sandbox(&limits, started).map_err(|e| e.message(&limits))?;
    context.with(
        |ctx| match Module::declare(ctx.clone(), MODULE, code).catch(&ctx) {
            Ok(_) => Ok(()),
            Err(caught) => Err(failure(caught, started + limits.timeout).message(&limits)),
        },
    )
}

/// Whether `code` is a module that compiles and whose default export is a
/// function; the message says why not. Its top level runs, within
/// `limits`: done when a workflow is saved, off the async workers.
pub fn check(code: &str, limits: Limits) -> Result<(), String> {
    let started = Instant::now();
    let (_runtime, context) = sandbox(&limits, started).map_err(|e| e.message(&limits))?;
    let deadline = started + limits.timeout;
    context.with(|ctx| match default_export(&ctx, code, deadline) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(message)) => Err(message),
        Err(caught) => Err(failure(caught, deadline).message(&limits)),
    })
}
