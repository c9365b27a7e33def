//! Audit events: who did what to which record, from where. Every change and
//! every sign-in attempt produces one.

mod service;

pub use service::{ACTION_MAX, AuditError, AuditService};

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// What kind of principal acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorType {
    /// A user, acting through a session (or a sign-in attempt naming them).
    User,
    /// A personal access token.
    Token,
    /// The service itself (bootstrap, command line).
    System,
}

impl ActorType {
    /// The name stored and returned by the audit API.
    pub const fn as_str(self) -> &'static str {
        match self {
            ActorType::User => "user",
            ActorType::Token => "token",
            ActorType::System => "system",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Self::User),
            "token" => Some(Self::Token),
            "system" => Some(Self::System),
            _ => None,
        }
    }
}

/// The principal behind an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actor {
    /// User, token or system.
    pub kind: ActorType,
    /// The user or token id; `None` for the system or an unknown sign-in email.
    pub id: Option<Uuid>,
}

impl Actor {
    /// A user acting through a session.
    pub const fn user(id: Uuid) -> Self {
        Self {
            kind: ActorType::User,
            id: Some(id),
        }
    }

    /// A personal access token.
    pub const fn token(id: Uuid) -> Self {
        Self {
            kind: ActorType::Token,
            id: Some(id),
        }
    }

    /// The service itself.
    pub const SYSTEM: Self = Self {
        kind: ActorType::System,
        id: None,
    };

    /// A sign-in attempt for an email that matches no account.
    pub const UNKNOWN_USER: Self = Self {
        kind: ActorType::User,
        id: None,
    };
}

/// One event to record.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// Who acted.
    pub actor: Actor,
    /// Dotted action name, such as `user.create` or `auth.login_failed`.
    pub action: &'static str,
    /// The record acted on, such as `user:<id>`.
    pub target: Option<String>,
    /// Action-specific facts; never secrets.
    pub details: Value,
    /// The caller's address.
    pub ip: Option<String>,
}

impl AuditEvent {
    /// An event with no details.
    pub fn new(
        actor: Actor,
        action: &'static str,
        target: Option<String>,
        ip: Option<String>,
    ) -> Self {
        Self {
            actor,
            action,
            target,
            details: Value::Null,
            ip,
        }
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }
}

/// A stored audit entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Entry id (UUID v7, time-ordered).
    pub id: Uuid,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Who acted.
    pub actor: Actor,
    /// Dotted action name.
    pub action: String,
    /// The record acted on.
    pub target: Option<String>,
    /// Action-specific facts.
    pub details: Value,
    /// The caller's address.
    pub ip: Option<String>,
}

/// Where to start a page of the audit log: entries strictly older than this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// Older than this entry id.
    Id(Uuid),
    /// Older than this instant.
    Time(DateTime<Utc>),
}

/// A filter over the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this action.
    pub action: Option<String>,
    /// Only this actor.
    pub actor_id: Option<Uuid>,
    /// At most this many entries (1..=1000).
    pub limit: u64,
    /// Keyset cursor.
    pub before: Option<Before>,
}

/// Reading the audit log (writes go with the change they record, in the same transaction).
#[async_trait::async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Entries matching `query`, newest first.
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, kernel::StoreError>;
    /// Records an event that stands alone.
    async fn record(&self, event: AuditEvent) -> Result<(), kernel::StoreError>;
}
