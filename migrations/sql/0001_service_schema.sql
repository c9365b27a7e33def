-- The service's own tables, in schema svc.
CREATE SCHEMA IF NOT EXISTS svc;

CREATE TABLE svc.users (
    id              uuid PRIMARY KEY,
    email           text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    password_hash   text,
    name            text CHECK (length(name) <= 200),
    email_verified  boolean NOT NULL DEFAULT false,
    active          boolean NOT NULL DEFAULT true,
    timezone        text,
    failed_sign_ins integer NOT NULL DEFAULT 0,
    locked_until    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON svc.users (lower(email));

CREATE TABLE svc.roles (
    id           uuid PRIMARY KEY,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description  text,
    api_access   boolean NOT NULL DEFAULT true,
    admin_access boolean NOT NULL DEFAULT false,
    built_in     boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX roles_name_key ON svc.roles (lower(name));

INSERT INTO svc.roles (id, name, description, api_access, admin_access, built_in) VALUES
    ('00000000-0000-7000-8000-000000000001', 'Administrators', 'Full access to the Admin API; bypasses grants', true, true, true),
    ('00000000-0000-7000-8000-000000000002', 'Users', 'API access, no grants', true, false, true);

CREATE TABLE svc.role_members (
    user_id    uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    role_id    uuid NOT NULL REFERENCES svc.roles (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, role_id)
);
CREATE INDEX role_members_role_idx ON svc.role_members (role_id);

CREATE TABLE svc.sessions (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    ip         text,
    user_agent text
);
CREATE INDEX sessions_user_idx ON svc.sessions (user_id);

CREATE TABLE svc.api_tokens (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    name       text NOT NULL,
    plane      text NOT NULL CHECK (plane IN ('API', 'ADMIN')),
    prefix     text NOT NULL,
    token_hash bytea NOT NULL UNIQUE,
    created_by uuid REFERENCES svc.users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_tokens_user_idx ON svc.api_tokens (user_id);

CREATE TABLE svc.settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE svc.audit_log (
    id         uuid PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor_type text NOT NULL CHECK (actor_type IN ('user', 'token', 'system')),
    actor_id   uuid,
    action     text NOT NULL,
    target     text,
    details    jsonb,
    ip         text
);
CREATE INDEX audit_log_at_idx ON svc.audit_log (id DESC);
CREATE INDEX audit_log_actor_idx ON svc.audit_log (actor_id, id DESC);
CREATE INDEX audit_log_action_idx ON svc.audit_log (action, id DESC);
