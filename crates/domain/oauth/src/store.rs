//! Persistence of pending flows and linked identities.

use async_trait::async_trait;
use audit::AuditEvent;
use auth::{NewSession, NewUser};
use chrono::{DateTime, Utc};
use kernel::StoreError;
use uuid::Uuid;

/// A flow between its start and its callback, found by its state's hash.
#[derive(Debug, Clone)]
pub struct PendingFlow {
    /// SHA-256 of the `state` sent to the provider.
    pub state_hash: [u8; 32],
    /// The provider it was started for.
    pub provider: String,
    /// Where the browser returns, checked at the start.
    pub redirect_to: String,
    /// The PKCE verifier whose challenge went to the provider.
    pub pkce_verifier: String,
    /// The OIDC nonce.
    pub nonce: Option<String>,
    /// End of validity.
    pub expires_at: DateTime<Utc>,
}

/// An identity of a provider linked to an account (`svc.user_identities`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Identity id.
    pub id: Uuid,
    /// The account.
    pub user_id: Uuid,
    /// `google`, `github` or `oidc`.
    pub provider: String,
    /// The provider's stable id of the person.
    pub subject: String,
    /// The email the provider gave last.
    pub email: Option<String>,
    /// When it was linked.
    pub created_at: DateTime<Utc>,
    /// When it last signed in.
    pub last_used_at: DateTime<Utc>,
}

/// The account an identity leads to, with what decides whether it may sign in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountMatch {
    /// The account.
    pub user_id: Uuid,
    /// The linked identity; `None` when the account matched by email.
    pub identity_id: Option<Uuid>,
    /// Deactivated accounts cannot sign in.
    pub active: bool,
    /// Some role gives API access.
    pub api_access: bool,
    /// TOTP is on: the sign-in ends at a challenge.
    pub totp: bool,
    /// A passkey is registered (a challenge for an administrator while
    /// `auth.mfa_required_for_admins` is on).
    pub passkey: bool,
    /// Member of a role with admin access.
    pub admin: bool,
}

/// What a successful provider sign-in writes besides the session.
#[derive(Debug, Clone)]
pub enum SignInPlan {
    /// An identity linked before: its email and last use are refreshed.
    Returning {
        /// The identity.
        identity_id: Uuid,
        /// The email the provider gave now.
        email: Option<String>,
    },
    /// An existing account gets the identity; the provider verified its email.
    Link(Identity),
    /// A new account (verified email, no password) with the identity.
    Register(NewUser, Identity),
}

/// Persistence of the provider sign-in flow.
#[async_trait]
pub trait OAuthStore: Send + Sync + 'static {
    /// Stores a new flow, purging the expired ones on the way.
    async fn save_flow(&self, flow: PendingFlow, now: DateTime<Utc>) -> Result<(), StoreError>;
    /// Removes and answers the flow of a state hash, whatever its age:
    /// a state is used up by its first callback.
    async fn take_flow(&self, state_hash: &[u8; 32]) -> Result<Option<PendingFlow>, StoreError>;
    /// The account linked to (provider, subject), else the one whose email
    /// matches case-insensitively.
    async fn account_for(
        &self,
        provider: &str,
        subject: &str,
        email: Option<&str>,
    ) -> Result<Option<AccountMatch>, StoreError>;
    /// Whether a role gives API access.
    async fn role_api_access(&self, role_id: Uuid) -> Result<bool, StoreError>;
    /// Writes the plan, the session (none: the sign-in goes on to a second
    /// factor) and the events in one transaction.
    async fn sign_in(
        &self,
        plan: SignInPlan,
        session: Option<NewSession>,
        events: Vec<AuditEvent>,
    ) -> Result<(), StoreError>;
    /// The identities linked to a user, oldest first; `None` for an unknown user.
    async fn identities(&self, user_id: Uuid) -> Result<Option<Vec<Identity>>, StoreError>;
    /// Unlinks one identity of a user; false when there is none.
    async fn delete_identity(
        &self,
        user_id: Uuid,
        identity_id: Uuid,
        event: AuditEvent,
    ) -> Result<bool, StoreError>;
}
