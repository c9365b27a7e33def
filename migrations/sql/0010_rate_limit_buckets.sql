-- Rate limits in per-second buckets: a call costs the same whatever the limit
-- (the window of timestamps of 0007 grew with it). 61 buckets cover the
-- current second and the 60 before it, so never more than the limit is
-- accepted in any 60 seconds; a refused call is not counted.
DROP TABLE svc.rate_limits;
CREATE TABLE svc.rate_limits (
    key     text PRIMARY KEY,
    -- secs[i]: the epoch second bucket i counts; counts[i]: its calls.
    secs    bigint[] NOT NULL,
    counts  integer[] NOT NULL,
    last_at timestamptz NOT NULL
);
CREATE INDEX rate_limits_last_at_idx ON svc.rate_limits (last_at);

-- Takes a call of `p_key` when fewer than `p_limit` were taken in the window,
-- under the row's lock (atomic for every instance); answers 0, or the seconds
-- until a call is accepted again. The calling transaction commits without
-- waiting for the WAL flush: the row's lock is held for microseconds, not a
-- disk flush, so one busy address does not queue every call behind fsync.
-- A crash of PostgreSQL can forget the last few counts (the limit is briefly
-- more lenient), never count a call twice.
CREATE FUNCTION svc.take_rate(p_key text, p_limit bigint) RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    now_s  bigint := floor(extract(epoch FROM now()))::bigint;
    slot   integer := (now_s % 61)::integer + 1;
    w      svc.rate_limits%ROWTYPE;
    total  bigint := 0;
    oldest bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT * INTO w FROM svc.rate_limits WHERE key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO svc.rate_limits (key, secs, counts, last_at)
        VALUES (p_key, array_fill(0::bigint, ARRAY[61]), array_fill(0, ARRAY[61]), now())
        ON CONFLICT (key) DO NOTHING;
        SELECT * INTO w FROM svc.rate_limits WHERE key = p_key FOR UPDATE;
    END IF;
    FOR i IN 1..61 LOOP
        IF w.secs[i] > now_s - 61 AND w.counts[i] > 0 THEN
            total := total + w.counts[i];
            oldest := least(coalesce(oldest, w.secs[i]), w.secs[i]);
        END IF;
    END LOOP;
    IF total >= p_limit THEN
        RETURN greatest(oldest + 61 - now_s, 1);
    END IF;
    IF w.secs[slot] = now_s THEN
        w.counts[slot] := w.counts[slot] + 1;
    ELSE
        w.secs[slot] := now_s;
        w.counts[slot] := 1;
    END IF;
    UPDATE svc.rate_limits SET secs = w.secs, counts = w.counts, last_at = now() WHERE key = p_key;
    RETURN 0;
END
$$;
