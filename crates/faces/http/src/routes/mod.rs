//! Every route of the service, one module per area.

pub mod account;
pub mod admin;
pub(crate) mod assets;
pub mod auth;
pub mod console;
pub mod data;
pub mod docs;
pub mod files;
pub mod health;
pub mod help;
pub mod mcp;
pub mod mfa;
pub mod oauth;
pub mod pages;
pub mod passkeys;
pub mod realtime;
pub mod rpc;
pub mod views;
pub mod workflows;
