//! Domain records to wire types.

use api_types as wire;

/// A user as sent to clients.
pub fn user(u: auth::User) -> wire::User {
    wire::User {
        id: u.id,
        email: u.email,
        name: u.name,
        email_verified: u.email_verified,
        active: u.active,
        timezone: u.timezone,
        roles: u
            .roles
            .into_iter()
            .map(|r| wire::RoleRef {
                id: r.id,
                name: r.name,
            })
            .collect(),
        mfa: wire::UserMfa {
            totp: u.mfa.totp,
            passkeys: u.mfa.passkeys,
        },
        created_at: u.created_at,
    }
}

/// A token record without its secret.
pub fn token(t: auth::TokenInfo) -> wire::Token {
    wire::Token {
        id: t.id,
        user_id: t.user_id,
        name: t.name,
        plane: t.plane.as_str().to_owned(),
        prefix: t.prefix,
        expires_at: t.expires_at,
        created_at: t.created_at,
    }
}

/// A token just issued, with its secret.
pub fn issued(t: auth::IssuedToken) -> wire::IssuedToken {
    wire::IssuedToken {
        record: token(t.info),
        token: t.token,
    }
}

/// A role.
pub fn role(r: permissions::Role) -> wire::Role {
    wire::Role {
        id: r.id,
        name: r.name,
        description: r.description,
        api_access: r.api_access,
        built_in: r.built_in,
    }
}

/// An audit entry.
pub fn audit_entry(e: audit::AuditEntry) -> wire::AuditEntry {
    wire::AuditEntry {
        id: e.id,
        at: e.at,
        actor_type: e.actor.kind.as_str().to_owned(),
        actor_id: e.actor.id,
        action: e.action,
        target: e.target,
        details: e.details,
        ip: e.ip,
    }
}

/// A pending invitation.
pub fn invitation(i: auth::Invitation) -> wire::Invitation {
    wire::Invitation {
        id: i.id,
        email: i.email,
        name: i.name,
        role_ids: i.role_ids,
        created_at: i.created_at,
        expires_at: i.expires_at,
    }
}

/// A run's error as sent to clients.
pub fn run_error(e: workflows::RunError) -> wire::RunError {
    wire::RunError {
        code: e.code,
        message: e.message,
    }
}

/// A run's outcome as sent to clients.
pub fn outcome(o: workflows::Outcome) -> wire::RunOutcome {
    wire::RunOutcome {
        id: o.id,
        status: o.status.as_str().to_owned(),
        result: o.result,
        error: o.error.map(run_error),
    }
}

/// A linked identity on the wire.
pub fn identity(i: oauth::Identity) -> wire::LinkedIdentity {
    wire::LinkedIdentity {
        id: i.id,
        provider: i.provider,
        subject: i.subject,
        email: i.email,
        created_at: i.created_at,
        last_used_at: i.last_used_at,
    }
}
