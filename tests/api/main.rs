//! Black-box tests of the HTTP API over real PostgreSQL and real HTTP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly"
)]

mod account;
mod admin_roles;
mod admin_users;
mod answers;
mod audit;
mod binary;
mod browser;
mod concurrency;
mod console;
mod console_functions;
mod csv;
mod data;
mod envelope;
mod factor_rules;
mod faults;
mod files;
mod fuzz;
mod grants;
mod hooks;
mod instances;
mod login;
mod login_limits;
mod mcp;
mod mfa;
mod notes_app;
mod oauth;
mod openapi;
mod passkeys;
mod pooler;
mod processes;
mod realtime;
mod related;
mod replicas;
mod restore;
mod rpc;
mod rpc_documents;
mod schema;
mod schema_evolution;
mod scripts;
mod security;
mod sessions;
mod settings;
mod snapshot;
mod sql_console;
mod tokens;
mod trust;
mod trust_fourth;
mod views;
mod workflow_constructs;
mod workflows;

/// Id of the built-in `Users` role.
pub const USERS_ROLE: &str = "00000000-0000-7000-8000-000000000002";
/// Id of the built-in `Administrators` role.
pub const ADMINS_ROLE: &str = "00000000-0000-7000-8000-000000000001";
