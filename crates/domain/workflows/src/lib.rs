//! Workflows (API.md section 6): definitions and their validation, `{{path}}`
//! templates, the step executor and the run state machine, and the service
//! behind the Admin API's workflow routes, the webhook and the result route.
//!
//! Where things are: `model` (a definition parsed, one parser per step
//! type), `definitions` (the Admin API's workflow routes), `webhook` (a
//! webhook call answered, the result route), `runner` (runs started,
//! awaited, resumed and purged), `engine` (the steps executed, with
//! retries, error handlers, loops and calls), `children` (child runs of
//! call steps), `schedule` (schedule ticks claimed once across instances),
//! `starts` (manual runs and replays), `steps` (data steps through the
//! Data API), `hooks` (write hooks run for the Data API).
//! Storage, data access and outgoing HTTP are traits, so the crate is tested
//! without a database and can be embedded.

mod children;
pub mod condition;
mod definitions;
pub mod engine;
mod error;
mod exported;
mod hooks;
pub mod model;
mod ports;
mod redact;
pub mod run;
mod runner;
mod schedule;
mod service;
mod starts;
mod steps;
pub mod store;
pub mod template;
mod webhook;

pub use definitions::{WebhookInfo, WorkflowInput};
pub use engine::{
    ChildRuns, Outbound, OutgoingRequest, Ports, RunJournal, RunUser, ScriptRunner, SettledScripts,
    StepData,
};
pub use error::WorkflowError;
pub use exported::{redact_secrets, restore_secrets};
pub use hooks::WorkflowHooks;
pub use model::Definition;
pub use redact::redacted;
pub use run::{Outcome, RunError, RunRecord, RunStatus, StepRecord};
pub use service::{RunnerOptions, WorkflowService};
pub use steps::DataSteps;
pub use store::WorkflowStore;
pub use webhook::{WebhookAnswer, WebhookCall};
