//! Users and their credentials. `SignInService` (`sign_in`): the credential
//! resolver of every protected route, sign-in with lockout, sessions and
//! personal access tokens. `AccountService` (`account`, `users`):
//! registration, password reset and change, email verification,
//! invitations, and the users' administration. `mfa`: TOTP, recovery
//! codes and the sign-in challenge of accounts with a second factor.
//! `passkey`: WebAuthn passkeys, registered by a signed-in person and
//! signing in on their own.

mod account;
pub mod email;
mod email_code;
mod error;
mod hasher;
mod mfa;
mod model;
mod passkey;
pub mod secret;
mod sign_in;
mod store;
mod users;

pub use account::{AccountService, InviteRequest};
pub use email_code::EmailCodeProof;
pub use error::AuthError;
pub use hasher::HashPool;
pub use mfa::{TotpEnrollment, totp_code, totp_step};
pub use model::*;
pub use passkey::{CeremonyStart, PasskeyService};
pub use sign_in::{MAX_TOKEN_DAYS, SignInService, TokenRequest, needs_second_step};
pub use store::{
    AuthStore, CredentialStore, LinkStore, MfaStore, PasskeyStore, TokenStore, UserStore,
};
pub use users::{ChangeUser, CreateUser};
