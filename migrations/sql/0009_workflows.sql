-- Workflows (API.md section 6): definitions with a draft and a published
-- snapshot, durable runs, and the row events that start database-event runs.

-- A UUID v7 (time-ordered), for rows created inside SQL statements.
CREATE FUNCTION svc.uuid_v7() RETURNS uuid
    LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
            PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
            FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

CREATE TABLE svc.workflows (
    id           uuid PRIMARY KEY,
    slug         text NOT NULL UNIQUE,
    name         text NOT NULL,
    enabled      boolean NOT NULL DEFAULT true,
    -- The definition being edited: { trigger, steps }.
    draft        jsonb NOT NULL,
    -- The snapshot webhooks and events run; null until the first publish.
    published    jsonb,
    published_at timestamptz,
    -- For database-event triggers of the published snapshot: what starts a run.
    event_resource_id uuid REFERENCES svc.resources (id) ON DELETE SET NULL,
    event_kinds  text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workflows_event_idx ON svc.workflows (event_resource_id) WHERE event_resource_id IS NOT NULL;

-- Workflow grants name an existing workflow and go with it.
DELETE FROM svc.grants g WHERE g.workflow_id IS NOT NULL;
ALTER TABLE svc.grants ADD CONSTRAINT grants_workflow_fkey
    FOREIGN KEY (workflow_id) REFERENCES svc.workflows (id) ON DELETE CASCADE;
CREATE INDEX grants_workflow_idx ON svc.grants (workflow_id) WHERE workflow_id IS NOT NULL;

CREATE TABLE svc.workflow_runs (
    id            uuid PRIMARY KEY,
    workflow_id   uuid NOT NULL REFERENCES svc.workflows (id) ON DELETE CASCADE,
    status        text NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    test          boolean NOT NULL DEFAULT false,
    -- The definition the run executes (the published snapshot, or the draft in test mode).
    definition    jsonb NOT NULL,
    -- start.data as stored: credential headers redacted.
    input         jsonb NOT NULL,
    -- The user the steps run as, and the authenticated caller (null: public or event).
    run_as        uuid NOT NULL,
    caller_id     uuid,
    result        jsonb,
    error         jsonb,
    -- Each finished step: { id, type, status, result, error, startedAt, finishedAt }.
    steps         jsonb NOT NULL DEFAULT '[]',
    cancel_requested boolean NOT NULL DEFAULT false,
    -- The instance executing it, until when; an expired lease is taken over.
    lease_owner   uuid,
    lease_start   timestamptz,
    lease_until   timestamptz,
    attempts      integer NOT NULL DEFAULT 1,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE INDEX workflow_runs_history_idx ON svc.workflow_runs (workflow_id, started_at DESC);
CREATE INDEX workflow_runs_lease_idx ON svc.workflow_runs (lease_until) WHERE status = 'RUNNING';
CREATE INDEX workflow_runs_finished_idx ON svc.workflow_runs (finished_at) WHERE finished_at IS NOT NULL;

-- Row changes of tables that published, enabled workflows listen to, written
-- in the changing transaction (also for plain SQL), consumed exactly once.
CREATE TABLE svc.row_events (
    id          bigserial PRIMARY KEY,
    resource_id uuid NOT NULL,
    event       text NOT NULL,
    old         jsonb,
    new         jsonb,
    at          timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION svc.capture_row_event() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := lower(TG_OP);
    resource uuid;
BEGIN
    SELECT r.id INTO resource FROM svc.resources r
        WHERE r.schema_name = TG_TABLE_SCHEMA AND r.table_name = TG_TABLE_NAME;
    IF resource IS NOT NULL AND EXISTS (
        SELECT 1 FROM svc.workflows w
        WHERE w.event_resource_id = resource AND w.enabled AND w.published IS NOT NULL
          AND kind = ANY (w.event_kinds)) THEN
        INSERT INTO svc.row_events (resource_id, event, old, new)
        VALUES (resource, kind,
                CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
                CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
        PERFORM pg_notify('tessera_row_events', '');
    END IF;
    RETURN NULL;
END
$$;
