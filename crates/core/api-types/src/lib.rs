//! Wire types of the HTTP API: request and response bodies with their OpenAPI
//! schemas, one module per area of the API. No logic lives here.

mod account;
mod admin;
mod auth;
mod envelope;
mod files;
mod schema;
mod sql;
mod views;
mod workflows;

pub use account::*;
pub use admin::*;
pub use auth::*;
pub use envelope::*;
pub use files::*;
pub use schema::*;
pub use sql::*;
pub use views::*;
pub use workflows::*;
