//! The sandbox of `script` steps (API.md 18): a JavaScript module whose
//! default export is called with a JSON context, in a QuickJS runtime of
//! its own with a memory limit and a deadline, with nothing of the host
//! but `console.log`. [`ScriptPool`] runs them off the async workers, a
//! bounded number at once.

mod pool;
mod sandbox;

pub use pool::ScriptPool;
pub use sandbox::{RESULT_MAX_BYTES, check, compile, run};

use std::time::Duration;

/// The most lines of `console.log` a run keeps.
pub const LOG_LINES_MAX: usize = 100;
/// The most characters of `console.log` a run keeps, all lines together.
pub const LOG_CHARS_MAX: usize = 10_000;

/// What one run may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU and waiting together, the wait for the pool included.
    pub timeout: Duration,
    /// The runtime's heap, in bytes.
    pub memory_bytes: usize,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptError {
    /// The script threw `{ code, message }` with an UPPER_SNAKE code.
    Thrown {
        /// The code it chose.
        code: String,
        /// Its message.
        message: String,
    },
    /// It threw anything else, its result is not JSON, or it did not
    /// compile: `SCRIPT_ERROR`.
    Failed(String),
    /// Past its time: `SCRIPT_TIMEOUT`.
    Timeout,
    /// Past its memory: `SCRIPT_MEMORY`.
    Memory,
}

impl ScriptError {
    /// The step's error code.
    pub fn code(&self) -> &str {
        match self {
            Self::Thrown { code, .. } => code,
            Self::Failed(_) => "SCRIPT_ERROR",
            Self::Timeout => "SCRIPT_TIMEOUT",
            Self::Memory => "SCRIPT_MEMORY",
        }
    }

    /// The step's error message.
    pub fn message(&self, limits: &Limits) -> String {
        match self {
            Self::Thrown { message, .. } | Self::Failed(message) => message.clone(),
            Self::Timeout => format!("the script ran past its {} ms", limits.timeout.as_millis()),
            Self::Memory => format!(
                "the script used more than its {} MB",
                limits.memory_bytes >> 20
            ),
        }
    }
}

/// What a run ended with, and what it logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The default export's value as JSON (`undefined` is null), or why not.
    pub result: Result<serde_json::Value, ScriptError>,
    /// Its `console.log` lines, within [`LOG_LINES_MAX`] and
    /// [`LOG_CHARS_MAX`].
    pub logs: Vec<String>,
}

#[cfg(test)]
mod tests;
