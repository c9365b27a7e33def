-- Invitations, one-time tokens (reset, verification, invitation) and the email outbox.

CREATE TABLE svc.invitations (
    id          uuid PRIMARY KEY,
    email       text NOT NULL,
    name        text,
    role_ids    uuid[] NOT NULL DEFAULT '{}',
    invited_by  uuid REFERENCES svc.users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz
);
CREATE INDEX invitations_email_idx ON svc.invitations (lower(email));

CREATE TABLE svc.one_time_tokens (
    id            uuid PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('reset', 'verify', 'invite')),
    token_hash    bytea NOT NULL UNIQUE,
    user_id       uuid REFERENCES svc.users (id) ON DELETE CASCADE,
    invitation_id uuid REFERENCES svc.invitations (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    CHECK ((kind = 'invite') = (invitation_id IS NOT NULL)),
    CHECK ((kind = 'invite') = (user_id IS NULL))
);

CREATE TABLE svc.email_outbox (
    id              uuid PRIMARY KEY,
    to_address      text NOT NULL,
    kind            text NOT NULL,
    subject         text NOT NULL,
    body_text       text NOT NULL,
    body_html       text NOT NULL,
    link            text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    logged_at       timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text
);
CREATE INDEX email_outbox_due_idx ON svc.email_outbox (next_attempt_at) WHERE sent_at IS NULL;
