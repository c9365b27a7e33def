-- Database functions registered for the Data API (API.md 18): a resource
-- of kind `function`, hidden until exposed, called through /api/rpc. Its
-- arguments, result and volatility are read from pg_proc when asked, so a
-- function replaced in place is described as it is now.
CREATE TABLE svc.functions (
    id              uuid PRIMARY KEY,
    schema_name     text NOT NULL,
    function_name   text NOT NULL,
    exposed_methods text[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT functions_name_key UNIQUE (schema_name, function_name)
);
CREATE TRIGGER functions_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.functions
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('catalog');
CREATE TRIGGER functions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.functions
    FOR EACH STATEMENT EXECUTE FUNCTION svc.notify_catalog();

-- A grant may name a function, and then only invokes it; invoke names a
-- workflow or a function.
ALTER TABLE svc.grants ADD COLUMN function_id uuid REFERENCES svc.functions (id) ON DELETE CASCADE DEFERRABLE;
ALTER TABLE svc.grants DROP CONSTRAINT grants_one_target;
ALTER TABLE svc.grants ADD CONSTRAINT grants_one_target CHECK (
    num_nonnulls(resource_id, workflow_id, data_view_id, function_id) = 1);
ALTER TABLE svc.grants DROP CONSTRAINT grants_check1;
ALTER TABLE svc.grants ADD CONSTRAINT grants_invoke_target CHECK (
    (action = 'invoke') = (workflow_id IS NOT NULL OR function_id IS NOT NULL));
CREATE INDEX grants_function_idx ON svc.grants (function_id) WHERE function_id IS NOT NULL;
