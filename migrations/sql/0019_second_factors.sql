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

-- Email sign-in codes: a one-time token of kind `code`, whose email carries
-- a link and a 6-digit code. `code_hash` is SHA-256 of the token's hash
-- followed by the code; `attempts` counts wrong codes (the 5th ends it).
ALTER TABLE svc.one_time_tokens DROP CONSTRAINT one_time_tokens_kind_check;
ALTER TABLE svc.one_time_tokens
    ADD CONSTRAINT one_time_tokens_kind_check CHECK (kind IN ('reset', 'verify', 'invite', 'code')),
    ADD COLUMN code_hash bytea,
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT one_time_tokens_code_check CHECK ((kind = 'code') = (code_hash IS NOT NULL));
CREATE INDEX one_time_tokens_code_idx ON svc.one_time_tokens (user_id)
    WHERE kind = 'code' AND used_at IS NULL;

-- Its template: `{{code}}` is a placeholder too, and the code's email must
-- carry it as well as the link.
ALTER TABLE svc.email_templates DROP CONSTRAINT email_templates_kind_check;
ALTER TABLE svc.email_templates
    ADD CONSTRAINT email_templates_kind_check CHECK (kind IN ('reset', 'verify', 'invite', 'code'));

CREATE OR REPLACE FUNCTION svc.check_email_template() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    part text;
    body text;
BEGIN
    IF NEW.subject ~ '[\r\n]' OR btrim(NEW.subject) = '' OR length(NEW.subject) > 200 THEN
        RAISE EXCEPTION 'must be one line of 1 to 200 characters'
            USING ERRCODE = 'TS400', COLUMN = 'subject';
    END IF;
    FOREACH part IN ARRAY ARRAY['subject', 'body_text', 'body_html'] LOOP
        body := CASE part WHEN 'subject' THEN NEW.subject
                          WHEN 'body_text' THEN NEW.body_text ELSE NEW.body_html END;
        IF NEW.kind = 'code' THEN
            IF replace(replace(replace(body, '{{name}}', ''), '{{link}}', ''), '{{code}}', '') ~ '\{\{|\}\}' THEN
                RAISE EXCEPTION 'has a placeholder other than {{name}}, {{link}} and {{code}}, or unbalanced braces'
                    USING ERRCODE = 'TS400', COLUMN = part;
            END IF;
            IF part <> 'subject' AND position('{{code}}' IN body) = 0 THEN
                RAISE EXCEPTION 'must contain {{code}}'
                    USING ERRCODE = 'TS400', COLUMN = part;
            END IF;
        ELSIF replace(replace(body, '{{name}}', ''), '{{link}}', '') ~ '\{\{|\}\}' THEN
            RAISE EXCEPTION 'has a placeholder other than {{name}} and {{link}}, or unbalanced braces'
                USING ERRCODE = 'TS400', COLUMN = part;
        END IF;
        IF part <> 'subject' AND position('{{link}}' IN body) = 0 THEN
            RAISE EXCEPTION 'must contain {{link}}'
                USING ERRCODE = 'TS400', COLUMN = part;
        END IF;
    END LOOP;
    IF length(NEW.body_text) > 100000 OR length(NEW.body_html) > 100000 THEN
        RAISE EXCEPTION 'must be at most 100000 characters'
            USING ERRCODE = 'TS400', COLUMN = CASE WHEN length(NEW.body_text) > 100000
                                                    THEN 'body_text' ELSE 'body_html' END;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

INSERT INTO svc.email_templates (kind, subject, body_text, body_html) VALUES
    ('code', 'Your sign-in code',
     $tpl$Hello{{name}},

Your sign-in code is {{code}}. Type it on the sign-in page, or open this
link, within 15 minutes:

{{link}}

If you did not ask to sign in, ignore this email: nobody can sign in
without the code.
$tpl$,
     $tpl$<!DOCTYPE html>
<html lang="en"><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{name}},</p>
<p>Your sign-in code is <strong style="font-size: 1.4em; letter-spacing: 0.1em">{{code}}</strong>. Type it on the sign-in page, or open this link, within 15 minutes:</p>
<p><a href="{{link}}">Sign in</a></p>
<p>If you did not ask to sign in, ignore this email: nobody can sign in without the code.</p>
</body></html>
$tpl$);

-- Whether an account has a second factor decides what an administrator's
-- session may reach while `auth.mfa_required_for_admins` is on: TOTP turned
-- on or off, and that setting, change what cached callers stand for.
-- (A new row holds a pending secret only, which changes nothing yet.)
CREATE TRIGGER user_totp_version AFTER DELETE OR TRUNCATE OR UPDATE OF secret ON svc.user_totp
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER mfa_rule_version AFTER INSERT OR UPDATE ON svc.settings
    FOR EACH ROW WHEN (NEW.key = 'auth.mfa_required_for_admins')
    EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER mfa_rule_removed_version AFTER DELETE ON svc.settings
    FOR EACH ROW WHEN (OLD.key = 'auth.mfa_required_for_admins')
    EXECUTE FUNCTION svc.bump_cache_version('auth');
