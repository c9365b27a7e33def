-- Tables registered for the Data API.
CREATE TABLE svc.resources (
    id              uuid PRIMARY KEY,
    schema_name     text NOT NULL,
    table_name      text NOT NULL,
    exposed_methods text[] NOT NULL DEFAULT '{}',
    check_messages  jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT resources_table_key UNIQUE (schema_name, table_name)
);
