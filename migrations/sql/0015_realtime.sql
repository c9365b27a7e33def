-- Realtime (API.md section 11): row changes of tables someone subscribed to
-- within the replay window, written in the changing transaction (also for
-- plain SQL) and read by every instance in one total order.

-- Tables with subscribers now or within the replay window: only their
-- changes are kept.
CREATE TABLE svc.realtime_interest (
    resource_id uuid PRIMARY KEY,
    until       timestamptz NOT NULL
);

-- `id` orders events by the writing transaction's id, then by their order in
-- it: (xid << 24) | n. Every transaction below the oldest one still running
-- is complete, so the events under (that xid << 24) are final and every
-- instance reads them in the same order.
CREATE TABLE svc.realtime_events (
    id          bigint PRIMARY KEY,
    resource_id uuid NOT NULL,
    event       text NOT NULL,
    old         json,
    new         json,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX realtime_events_at_idx ON svc.realtime_events (at);

-- Timestamps written in UTC, as the Data API writes them.
CREATE FUNCTION svc.capture_realtime_event() RETURNS trigger
    LANGUAGE plpgsql SET TimeZone = 'UTC' AS $$
DECLARE
    resource uuid := TG_ARGV[0]::uuid;
    n bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM svc.realtime_interest i
                   WHERE i.resource_id = resource AND i.until > now()) THEN
        RETURN NULL;
    END IF;
    n := coalesce(nullif(current_setting('tessera.realtime_n', true), ''), '0')::bigint + 1;
    IF n > 16777215 THEN
        -- Past 2^24 changes in one transaction its ids would collide: the
        -- rest is not streamed (docs/realtime.md).
        RETURN NULL;
    END IF;
    PERFORM set_config('tessera.realtime_n', n::text, true);
    INSERT INTO svc.realtime_events (id, resource_id, event, old, new)
    VALUES ((pg_current_xact_id()::text::bigint << 24) | n, resource, lower(TG_OP),
            CASE WHEN TG_OP <> 'INSERT' THEN to_json(OLD) END,
            CASE WHEN TG_OP <> 'DELETE' THEN to_json(NEW) END);
    PERFORM pg_notify('tessera_realtime', '');
    RETURN NULL;
END
$$;

-- Keeps the changes of `resources` for `seconds` from now, and captures the
-- tables not captured yet (the trigger stays; without interest it returns
-- at once).
CREATE FUNCTION svc.realtime_keep(resources uuid[], seconds bigint) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    INSERT INTO svc.realtime_interest (resource_id, until)
        SELECT id, now() + make_interval(secs => seconds) FROM unnest(resources) AS id
    ON CONFLICT (resource_id) DO UPDATE SET until = greatest(svc.realtime_interest.until, EXCLUDED.until);
    FOR r IN SELECT res.id, res.schema_name, res.table_name FROM svc.resources res
             WHERE res.id = ANY (resources)
               AND to_regclass(format('%I.%I', res.schema_name, res.table_name)) IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgname = 'tessera_realtime'
                   AND t.tgrelid = to_regclass(format('%I.%I', res.schema_name, res.table_name)))
    LOOP
        EXECUTE format('CREATE OR REPLACE TRIGGER tessera_realtime AFTER INSERT OR UPDATE OR DELETE ON %I.%I '
                       'FOR EACH ROW EXECUTE FUNCTION svc.capture_realtime_event(%L)',
                       r.schema_name, r.table_name, r.id);
    END LOOP;
END
$$;
