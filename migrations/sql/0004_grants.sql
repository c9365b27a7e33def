-- Grants: what a role may do on a resource (or workflow), with an optional
-- row filter and column list.
CREATE TABLE svc.grants (
    id          uuid PRIMARY KEY,
    role_id     uuid NOT NULL REFERENCES svc.roles (id) ON DELETE CASCADE,
    resource_id uuid REFERENCES svc.resources (id) ON DELETE CASCADE,
    workflow_id uuid,
    action      text NOT NULL CHECK (action IN ('read', 'create', 'update', 'delete', 'invoke')),
    filter      jsonb,
    columns     text[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((resource_id IS NULL) <> (workflow_id IS NULL)),
    CHECK ((action = 'invoke') = (workflow_id IS NOT NULL))
);
CREATE INDEX grants_role_idx ON svc.grants (role_id);
CREATE INDEX grants_resource_idx ON svc.grants (resource_id);
