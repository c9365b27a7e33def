-- Second factors (API.md section 14): TOTP with recovery codes, and the
-- sign-in challenges that wait for a code.

-- A user's TOTP: a pending secret until a code confirms it, then the
-- secret in use. `last_step` is the 30 s step of the last code accepted:
-- a code is accepted only for a later step (compare-and-set), so none is
-- used twice. The secret cannot be hashed (codes are computed from it); no
-- route answers it after enrollment and no Data API resource reaches it.
CREATE TABLE svc.user_totp (
    user_id        uuid PRIMARY KEY REFERENCES svc.users (id) ON DELETE CASCADE,
    secret         bytea,
    pending_secret bytea,
    last_step      bigint,
    enabled_at     timestamptz,
    CHECK ((secret IS NULL) = (enabled_at IS NULL))
);

-- Recovery codes, as SHA-256 of the code; each works once.
CREATE TABLE svc.mfa_recovery_codes (
    user_id   uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    code_hash bytea NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- A sign-in that passed its first factor and waits for a code, looked up
-- by the SHA-256 of its secret (any instance may finish it). It dies when
-- used, at `expires_at`, or with its 5th wrong code. `checked_hash` is the
-- password hash the first factor verified (null: a provider or an
-- invitation): a password changed meanwhile ends it.
CREATE TABLE svc.mfa_challenges (
    id           uuid PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,
    user_id      uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    checked_hash text,
    attempts     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);
CREATE INDEX mfa_challenges_user_idx ON svc.mfa_challenges (user_id);
