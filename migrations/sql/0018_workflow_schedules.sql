-- Workflows on a clock, child runs and replays (API.md section 15).

-- The next tick of a published schedule trigger; claimed by moving it on
-- (compare-and-set), so that one instance starts each tick's run.
ALTER TABLE svc.workflows ADD COLUMN schedule_next_at timestamptz;
CREATE INDEX workflows_schedule_idx ON svc.workflows (schedule_next_at)
    WHERE schedule_next_at IS NOT NULL;

-- When a scheduler pass of any instance last ran: ticks after the pass
-- before this one, when that was moments ago, were due while an instance
-- ran (a late pass runs them); older ones were missed while none ran.
CREATE TABLE svc.schedule_passes (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    at  timestamptz NOT NULL
);
INSERT INTO svc.schedule_passes (one, at) VALUES (true, '1970-01-01T00:00:00Z');

-- A child run names the run whose call step started it (no foreign key:
-- runs are purged one by one) and the workflows of its calling chain, the
-- root's first and its own last (null: a run started by a trigger, whose
-- chain is its own workflow). A scheduled run names its tick, once per
-- workflow.
ALTER TABLE svc.workflow_runs
    ADD COLUMN parent_run_id uuid,
    ADD COLUMN chain uuid[],
    ADD COLUMN scheduled_at timestamptz;
CREATE UNIQUE INDEX workflow_runs_tick_idx ON svc.workflow_runs (workflow_id, scheduled_at)
    WHERE scheduled_at IS NOT NULL;
CREATE INDEX workflow_runs_parent_idx ON svc.workflow_runs (parent_run_id)
    WHERE parent_run_id IS NOT NULL;
