-- Passkeys (API.md section 14): WebAuthn credentials that sign in on their
-- own, and the ceremonies in flight.

-- A user's passkey. `credential` is the verified public key with its flags
-- and signature counter as the WebAuthn library keeps them; `sign_count`
-- repeats the counter so that a sign-in stores its new value by
-- compare-and-set (two sign-ins cannot both move it from one value).
-- Nothing in it is secret, and no Data API resource reaches it.
CREATE TABLE svc.passkeys (
    id            uuid PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES svc.users (id) ON DELETE CASCADE,
    credential_id bytea NOT NULL UNIQUE,
    name          text NOT NULL,
    credential    jsonb NOT NULL,
    sign_count    bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    last_used_at  timestamptz
);
CREATE INDEX passkeys_user_idx ON svc.passkeys (user_id);

-- A registration or sign-in ceremony waiting for the authenticator's
-- answer, looked up by the SHA-256 of its id (any instance may finish it)
-- and deleted as it is used: single-use, 5 minutes. `user_id` is the
-- registering account (null for a sign-in, whose account is not known
-- until the answer names it).
CREATE TABLE svc.webauthn_challenges (
    token_hash bytea PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('register', 'login')),
    user_id    uuid REFERENCES svc.users (id) ON DELETE CASCADE,
    state      jsonb NOT NULL,
    expires_at timestamptz NOT NULL,
    CHECK ((kind = 'register') = (user_id IS NOT NULL))
);
CREATE INDEX webauthn_challenges_expiry_idx ON svc.webauthn_challenges (expires_at);
CREATE INDEX webauthn_challenges_user_idx ON svc.webauthn_challenges (user_id);

-- A passkey is a second factor for `auth.mfa_required_for_admins`: adding
-- or removing one changes what cached callers stand for.
CREATE TRIGGER passkeys_version AFTER INSERT OR DELETE OR TRUNCATE ON svc.passkeys
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
