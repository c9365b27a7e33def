-- Sliding-window rate limits shared by every instance: one row per counted
-- key (such as `login:<ip>`), holding the instants of the attempts of the last
-- 60 seconds. A statement takes an attempt under the row's lock, so
-- concurrent attempts cannot pass the limit.
CREATE TABLE svc.rate_limits (
    key     text PRIMARY KEY,
    hits    timestamptz[] NOT NULL,
    last_at timestamptz NOT NULL
);
CREATE INDEX rate_limits_last_at_idx ON svc.rate_limits (last_at);
