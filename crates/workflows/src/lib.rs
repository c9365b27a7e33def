//! Workflows (API.md section 6): definitions and their validation, `{{path}}`
//! templates, the step executor and the run state machine, and the service
//! behind the Admin API's workflow routes, the webhook and the result route.
//! Storage, data access and outgoing HTTP are traits, so the crate is tested
//! without a database and can be embedded.

pub mod condition;
pub mod engine;
mod error;
pub mod model;
mod redact;
pub mod run;
mod service;
mod steps;
pub mod store;
pub mod template;

pub use engine::{Outbound, OutgoingRequest, Ports, RunJournal, RunUser, StepData};
pub use error::WorkflowError;
pub use model::Definition;
pub use redact::{REDACTED_HEADERS, redacted};
pub use run::{Outcome, RunError, RunRecord, RunStatus, StepRecord};
pub use service::{
    RunnerOptions, WebhookAnswer, WebhookCall, WebhookInfo, WorkflowInput, WorkflowService,
};
pub use steps::DataSteps;
pub use store::WorkflowStore;
