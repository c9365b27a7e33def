-- Security rules, fourth round (API.md section 21).

-- A session counts as made with a second factor only for factors that
-- existed when it proved one: a TOTP reset and set up again, or a passkey
-- removed and registered anew, is not what the session proved. One
-- sequence orders, across every instance, when a factor came to be (a
-- TOTP confirmed, a passkey registered) and when a session proved one (at
-- sign-in, or by enrolling); the database's order, not any instance's
-- clock. Factors and proven sessions that exist now are numbered in that
-- order, so every session keeps what it counted as before.
-- A session that outlived an administrators' reset of its person's
-- factors (a reset ended no session before this migration) ends now, as the
-- reset ends it from now on.
UPDATE svc.sessions s SET revoked_at = now()
 WHERE s.revoked_at IS NULL
   AND EXISTS (SELECT 1 FROM svc.audit_log a
                WHERE a.action = 'mfa.reset'
                  AND a.target = 'user:' || s.user_id::text
                  AND a.at >= s.created_at);
CREATE SEQUENCE svc.factor_seq;
ALTER TABLE svc.user_totp ADD COLUMN seq bigint;
UPDATE svc.user_totp SET seq = nextval('svc.factor_seq') WHERE secret IS NOT NULL;
ALTER TABLE svc.passkeys ADD COLUMN seq bigint NOT NULL DEFAULT nextval('svc.factor_seq');
ALTER TABLE svc.sessions ADD COLUMN factor_seq bigint;
UPDATE svc.sessions SET factor_seq = nextval('svc.factor_seq') WHERE factor IS NOT NULL;
ALTER TABLE svc.sessions
    ADD CONSTRAINT sessions_factor_seq_check CHECK ((factor IS NULL) = (factor_seq IS NULL));
