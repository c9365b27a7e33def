-- The Data API: a guard for rows written under a grant's filter, cache
-- invalidation of resources and grants, and the service tables that may be exposed.

-- Called on each written row inside the write statement: a row outside every
-- grant that allows the change aborts the statement, so nothing is written.
CREATE FUNCTION svc.permit(allowed boolean) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF allowed IS NOT TRUE THEN
        RAISE EXCEPTION 'row outside the grants' USING ERRCODE = 'TS403';
    END IF;
    RETURN true;
END
$$;

-- Every instance caches resources and grants; any change tells them to reload.
CREATE FUNCTION svc.notify_catalog() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tessera_catalog', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.resources
    FOR EACH STATEMENT EXECUTE FUNCTION svc.notify_catalog();
CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.grants
    FOR EACH STATEMENT EXECUTE FUNCTION svc.notify_catalog();

-- Service tables that may be exposed (hidden until an administrator exposes them).
INSERT INTO svc.resources (id, schema_name, table_name) VALUES
    ('00000000-0000-7000-8000-000000000101', 'svc', 'users'),
    ('00000000-0000-7000-8000-000000000102', 'svc', 'roles'),
    ('00000000-0000-7000-8000-000000000103', 'svc', 'role_members');
