-- Security rules, third round (API.md section 17).

-- How a session was made: its first step, and the second factor it proved
-- (at sign-in, or by enrolling the account's first factor). The
-- administrators' rule and the factor routes read them. Sessions made
-- before this migration count as made with a password alone.
ALTER TABLE svc.sessions
    ADD COLUMN method text NOT NULL DEFAULT 'password'
        CHECK (method IN ('password', 'email_code', 'provider', 'invitation', 'passkey')),
    ADD COLUMN factor text CHECK (factor IN ('totp', 'recovery_code', 'passkey'));

-- A sign-in challenge remembers the first step that led to it, for the
-- session it makes.
ALTER TABLE svc.mfa_challenges
    ADD COLUMN method text NOT NULL DEFAULT 'password'
        CHECK (method IN ('password', 'email_code', 'provider', 'invitation'));

-- A challenge finished with a passkey waits for the authenticator's answer
-- as a ceremony of kind `mfa`, keyed by the challenge's hash and bound to
-- its account.
ALTER TABLE svc.webauthn_challenges DROP CONSTRAINT webauthn_challenges_kind_check;
ALTER TABLE svc.webauthn_challenges DROP CONSTRAINT webauthn_challenges_check;
ALTER TABLE svc.webauthn_challenges
    ADD CONSTRAINT webauthn_challenges_kind_check CHECK (kind IN ('register', 'login', 'mfa')),
    ADD CONSTRAINT webauthn_challenges_check CHECK ((kind = 'login') = (user_id IS NULL));
