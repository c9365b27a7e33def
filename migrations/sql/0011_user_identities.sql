-- Sign-in with a provider (API.md section 3a): the identities linked to
-- accounts, and the pending flows' single-use states.

CREATE TABLE svc.user_identities (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    provider     text NOT NULL CHECK (provider IN ('google', 'github', 'oidc')),
    subject      text NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    email        text CHECK (length(email) <= 254),
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz NOT NULL,
    UNIQUE (provider, subject)
);
CREATE INDEX user_identities_user_idx ON svc.user_identities (user_id);

-- A state is stored only as its SHA-256; the PKCE verifier and nonce are
-- needed in clear by the callback, and live at most ten minutes.
CREATE TABLE svc.oauth_states (
    state_hash    bytea PRIMARY KEY,
    provider      text NOT NULL,
    redirect_to   text NOT NULL CHECK (length(redirect_to) <= 2048),
    pkce_verifier text NOT NULL,
    nonce         text,
    expires_at    timestamptz NOT NULL
);
CREATE INDEX oauth_states_expiry_idx ON svc.oauth_states (expires_at);
