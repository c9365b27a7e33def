//! Who may do what: roles, API access, the Admin API, and the two credential
//! planes. Grants on resources join this crate with the Data API.

mod access;
mod grants;
mod roles;
pub mod zone;

pub use access::{Access, Scope};

pub use grants::{Action, Grant, GrantQuery, GrantService, GrantStore, NewGrant, ResourceTarget};

pub use roles::{PermissionsError, Role, RoleChanges, RoleService, RoleStore};
use uuid::Uuid;

pub use kernel::{ADMINISTRATORS_ROLE_ID, USERS_ROLE_ID};

/// The half of the service a request addresses; tokens are bound to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plane {
    /// The Data API and the auth routes under `/api`.
    Api,
    /// The Admin API under `/admin/api`.
    Admin,
}

impl Plane {
    /// The name used in token records (`API` or `ADMIN`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Plane::Api => "API",
            Plane::Admin => "ADMIN",
        }
    }

    /// Parses `API` or `ADMIN`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "API" => Some(Self::Api),
            "ADMIN" => Some(Self::Admin),
            _ => None,
        }
    }
}

/// The credential a request was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A sign-in session.
    Session {
        /// The session id.
        id: Uuid,
    },
    /// A personal access token bound to one plane.
    Token {
        /// The token id.
        id: Uuid,
        /// The plane it works on.
        plane: Plane,
    },
    /// A workflow run acting as its user (Execute as, or the webhook's caller).
    Run {
        /// The run id.
        id: Uuid,
    },
}

/// An authenticated caller, as the database holds it when the request is answered
/// (read afresh, or remembered and checked against the auth version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user the credential acts as.
    pub user_id: Uuid,
    /// How the caller authenticated.
    pub credential: Credential,
    /// The user's roles.
    pub role_ids: Vec<Uuid>,
    /// Some role gives API access.
    pub api_access: bool,
    /// Member of Administrators.
    pub admin: bool,
    /// The user's own time zone preference.
    pub timezone: Option<String>,
}

/// Why an authenticated caller is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// A session-only route called with a token.
    #[error("this route needs a session, not an access token")]
    SessionRequired,
    /// A token used on the other plane.
    #[error("this token is not valid for this API")]
    WrongPlane,
    /// The user's roles give no API access.
    #[error("your roles give no API access")]
    NoApiAccess,
    /// The Admin API needs Administrators membership.
    #[error("only administrators may use the Admin API")]
    NotAdministrator,
    /// None of the caller's roles holds a grant for the action.
    #[error("your roles have no grant for this")]
    NoGrant,
}

impl kernel::ErrorCode for Denied {
    fn code(&self) -> kernel::Code {
        kernel::Code::PermissionDenied
    }

    fn message(&self) -> std::borrow::Cow<'_, str> {
        self.to_string().into()
    }
}

impl Principal {
    /// Whether the caller used a session (not a token).
    pub fn is_session(&self) -> bool {
        matches!(self.credential, Credential::Session { .. })
    }

    /// The session id, when the caller used a session.
    pub fn session_id(&self) -> Option<Uuid> {
        match self.credential {
            Credential::Session { id } => Some(id),
            Credential::Token { .. } | Credential::Run { .. } => None,
        }
    }

    /// Checks that this caller may use a route of `plane`; `session_only`
    /// routes refuse tokens.
    pub fn authorize(&self, plane: Plane, session_only: bool) -> Result<(), Denied> {
        match self.credential {
            Credential::Token { .. } if session_only => return Err(Denied::SessionRequired),
            Credential::Token { plane: bound, .. } if bound != plane => {
                return Err(Denied::WrongPlane);
            }
            _ => {}
        }
        match plane {
            Plane::Api if !self.api_access => Err(Denied::NoApiAccess),
            Plane::Admin if !self.admin => Err(Denied::NotAdministrator),
            _ => Ok(()),
        }
    }
}

impl Principal {
    /// The actor recorded in the audit log: the user for a session, the token for a token.
    pub fn actor(&self) -> audit::Actor {
        match self.credential {
            Credential::Session { .. } | Credential::Run { .. } => audit::Actor::user(self.user_id),
            Credential::Token { id, .. } => audit::Actor::token(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(credential: Credential, api_access: bool, admin: bool) -> Principal {
        Principal {
            user_id: Uuid::nil(),
            credential,
            role_ids: vec![],
            api_access,
            admin,
            timezone: None,
        }
    }

    #[test]
    fn planes() {
        let session = Credential::Session { id: Uuid::nil() };
        let api_token = Credential::Token {
            id: Uuid::nil(),
            plane: Plane::Api,
        };
        let admin_token = Credential::Token {
            id: Uuid::nil(),
            plane: Plane::Admin,
        };
        assert!(
            principal(session, true, false)
                .authorize(Plane::Api, true)
                .is_ok()
        );
        assert_eq!(
            principal(session, true, false).authorize(Plane::Admin, false),
            Err(Denied::NotAdministrator)
        );
        assert_eq!(
            principal(session, false, false).authorize(Plane::Api, false),
            Err(Denied::NoApiAccess)
        );
        assert!(
            principal(session, true, true)
                .authorize(Plane::Admin, false)
                .is_ok()
        );
        assert!(
            principal(api_token, true, false)
                .authorize(Plane::Api, false)
                .is_ok()
        );
        assert_eq!(
            principal(api_token, true, false).authorize(Plane::Api, true),
            Err(Denied::SessionRequired)
        );
        assert_eq!(
            principal(api_token, true, true).authorize(Plane::Admin, false),
            Err(Denied::WrongPlane)
        );
        assert_eq!(
            principal(admin_token, true, true).authorize(Plane::Api, false),
            Err(Denied::WrongPlane)
        );
        assert!(
            principal(admin_token, true, true)
                .authorize(Plane::Admin, false)
                .is_ok()
        );
        assert_eq!(
            principal(admin_token, true, false).authorize(Plane::Admin, false),
            Err(Denied::NotAdministrator)
        );
    }
}
