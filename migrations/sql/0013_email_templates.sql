-- Email templates as a service table (readable and writable through the Data
-- API by administrators and anyone granted), seeded with the built-in texts.
-- `{{name}}` (" <name>" or empty) and `{{link}}` are the placeholders; each
-- body carries the link. Checked on every write, however it comes.

CREATE TABLE svc.email_templates (
    kind       text PRIMARY KEY CHECK (kind IN ('reset', 'verify', 'invite')),
    subject    text NOT NULL,
    body_text  text NOT NULL,
    body_html  text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A template that would not render is refused with the column at fault
-- (SQLSTATE TS400, answered as 400 INVALID_PAYLOAD with `field`).
CREATE FUNCTION svc.check_email_template() RETURNS trigger
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
        IF replace(replace(body, '{{name}}', ''), '{{link}}', '') ~ '\{\{|\}\}' THEN
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

CREATE TRIGGER check_email_template BEFORE INSERT OR UPDATE ON svc.email_templates
    FOR EACH ROW EXECUTE FUNCTION svc.check_email_template();

-- Every kind of email keeps a template: they are changed, not deleted.
CREATE FUNCTION svc.keep_email_templates() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'email templates can be changed but not deleted' USING ERRCODE = 'TS409';
END
$$;

CREATE TRIGGER keep_email_templates BEFORE DELETE OR TRUNCATE ON svc.email_templates
    FOR EACH STATEMENT EXECUTE FUNCTION svc.keep_email_templates();

INSERT INTO svc.email_templates (kind, subject, body_text, body_html) VALUES
    ('reset', 'Reset your password',
     $tpl$Hello{{name}},

Someone asked to reset the password of your account. If it was you, open this
link within an hour to choose a new password:

{{link}}

If it was not you, ignore this email: your password stays as it is.
$tpl$,
     $tpl$<!DOCTYPE html>
<html lang="en"><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{name}},</p>
<p>Someone asked to reset the password of your account. If it was you, open this link within an hour to choose a new password:</p>
<p><a href="{{link}}">Choose a new password</a></p>
<p>If it was not you, ignore this email: your password stays as it is.</p>
</body></html>
$tpl$),
    ('verify', 'Confirm your email address',
     $tpl$Hello{{name}},

Please confirm your email address by opening this link within 48 hours:

{{link}}
$tpl$,
     $tpl$<!DOCTYPE html>
<html lang="en"><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{name}},</p>
<p>Please confirm your email address by opening this link within 48 hours:</p>
<p><a href="{{link}}">Confirm my email address</a></p>
</body></html>
$tpl$),
    ('invite', 'You are invited',
     $tpl$Hello{{name}},

You have been invited to an account. Open this link within 7 days to choose
your password and accept the invitation:

{{link}}
$tpl$,
     $tpl$<!DOCTYPE html>
<html lang="en"><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{name}},</p>
<p>You have been invited to an account. Open this link within 7 days to choose your password and accept the invitation:</p>
<p><a href="{{link}}">Accept the invitation</a></p>
</body></html>
$tpl$);

-- Readable and editable through the Data API (administrators; others by grant).
INSERT INTO svc.resources (id, schema_name, table_name, exposed_methods) VALUES
    ('00000000-0000-7000-8000-000000000104', 'svc', 'email_templates', '{GET,PATCH}');
