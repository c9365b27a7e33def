//! Sign-in with an OAuth 2.0 / OpenID Connect provider (Google, GitHub, any
//! OIDC issuer): the redirect flow with PKCE and a single-use state, the
//! identity checks, account matching, and the linked identities.

mod error;
mod protocol;
mod provider;
mod redirect;
mod service;
mod store;

pub use error::OAuthError;
pub use provider::Provider;
pub use service::{Callback, OAuthService};
pub use store::{AccountMatch, Identity, OAuthStore, PendingFlow, SignInPlan};
