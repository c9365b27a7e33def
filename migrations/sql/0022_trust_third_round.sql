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

-- Bounded answers (data.max_answer_bytes): each array of related rows
-- PostgreSQL builds into an answer is counted as it is built, in a
-- transaction-local counter, and the statement fails (TS413) as soon as the
-- total passes the ceiling; a nested array is taken back out when it is
-- placed inside an array that is counted whole, so every byte counts once.
-- Each statement outside a transaction starts at 0.
CREATE FUNCTION svc.answer_piece(piece json, cap bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    used bigint := coalesce(nullif(current_setting('tessera.answer_bytes', true), '')::bigint, 0)
                   + coalesce(octet_length(piece::text), 0);
BEGIN
    IF used > cap THEN
        RAISE EXCEPTION 'the answer is larger than data.max_answer_bytes' USING ERRCODE = 'TS413';
    END IF;
    PERFORM set_config('tessera.answer_bytes', used::text, true);
    RETURN piece;
END
$$;

CREATE FUNCTION svc.answer_settle(done json) RETURNS json
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    used bigint := coalesce(nullif(current_setting('tessera.answer_bytes', true), '')::bigint, 0)
                   - coalesce(octet_length(done::text), 0);
BEGIN
    PERFORM set_config('tessera.answer_bytes', greatest(used, 0)::text, true);
    RETURN done;
END
$$;
