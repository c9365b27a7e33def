//! Users and their credentials. `SignInService` (`sign_in`): the credential
//! resolver of every protected route, sign-in with lockout, sessions and
//! personal access tokens. `AccountService` (`account`, `users`):
//! registration, password reset and change, email verification,
//! invitations, and the users' administration.

mod account;
pub mod email;
mod error;
mod hasher;
mod model;
pub mod secret;
mod sign_in;
mod store;
mod users;

pub use account::{AccountService, InviteRequest};
pub use error::AuthError;
pub use hasher::HashPool;
pub use model::*;
pub use sign_in::{MAX_TOKEN_DAYS, SignInService, TokenRequest};
pub use store::AuthStore;
pub use users::{ChangeUser, CreateUser};
