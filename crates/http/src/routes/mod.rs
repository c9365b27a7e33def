//! Every route of the service, one module per area.

pub mod admin;
pub mod auth;
pub mod health;
