-- Rules of API.md section 16 that the database keeps for every instance.

-- Open realtime streams, one row each, so that a user's streams are counted
-- across instances (`realtime.max_subscribers_per_user`). The instance that
-- holds a stream renews `seen_at`; a row no instance renewed for a minute
-- (its instance died) no longer counts and is removed by the next taker.
CREATE TABLE svc.realtime_streams (
    id      uuid PRIMARY KEY,
    user_id uuid NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX realtime_streams_user_idx ON svc.realtime_streams (user_id);

-- Takes a stream slot for `p_user` when fewer than `p_limit` live ones are
-- held; answers whether it did. Serialised per user, so concurrent takers on
-- any instance cannot pass the limit together.
CREATE FUNCTION svc.take_stream(p_id uuid, p_user uuid, p_limit bigint) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('svc.realtime_streams:' || p_user::text, 0));
    DELETE FROM svc.realtime_streams
        WHERE user_id = p_user AND seen_at < now() - interval '60 seconds';
    IF (SELECT count(*) FROM svc.realtime_streams WHERE user_id = p_user) >= p_limit THEN
        RETURN false;
    END IF;
    INSERT INTO svc.realtime_streams (id, user_id) VALUES (p_id, p_user);
    RETURN true;
END
$$;

-- Emails sent to one address in the last hour (`auth.emails_per_address_per_hour`).
CREATE INDEX email_outbox_address_idx ON svc.email_outbox (lower(to_address), created_at);

-- Row events of workflows carry no secret of the service's own tables: the
-- columns the Data API never shows stay out of what a run stores.
CREATE OR REPLACE FUNCTION svc.capture_row_event() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := lower(TG_OP);
    resource uuid;
    secret text[] := CASE WHEN TG_TABLE_SCHEMA = 'svc'
        THEN ARRAY['password_hash', 'failed_sign_ins', 'locked_until', 'token_hash']
        ELSE ARRAY[]::text[] END;
BEGIN
    SELECT r.id INTO resource FROM svc.resources r
        WHERE r.schema_name = TG_TABLE_SCHEMA AND r.table_name = TG_TABLE_NAME;
    IF resource IS NOT NULL AND EXISTS (
        SELECT 1 FROM svc.workflows w
        WHERE w.event_resource_id = resource AND w.enabled AND w.published IS NOT NULL
          AND kind = ANY (w.event_kinds)) THEN
        INSERT INTO svc.row_events (resource_id, event, old, new)
        VALUES (resource, kind,
                CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) - secret END,
                CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) - secret END);
        PERFORM pg_notify('tessera_row_events', '');
    END IF;
    RETURN NULL;
END
$$;
