//! Users and their credentials: sign-in with lockout, sessions, personal access
//! tokens, the credential resolver of every protected route, and the user and
//! settings administration that goes with them.

mod account;
pub mod email;
mod error;
mod hasher;
mod model;
pub mod secret;
mod service;
mod settings;
mod store;

pub use account::InviteRequest;
pub use error::AuthError;
pub use hasher::HashPool;
pub use model::*;
pub use service::{AuthService, ChangeUser, CreateUser, MAX_TOKEN_DAYS, TokenRequest};
pub use settings::SettingsService;
pub use store::AuthStore;
