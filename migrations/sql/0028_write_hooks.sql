-- Write hooks (API.md 18): a published, enabled workflow whose trigger is
-- `beforeWrite` runs before the Data API writes rows of its table. The
-- catalog carries each table's hooks, so publishing, disabling, renaming
-- or deleting a hook moves the catalog version (which every write checks
-- in its own statement) and tells every instance. Other workflow changes
-- (a schedule's next tick, say) leave the catalog alone.
CREATE FUNCTION svc.is_write_hook(definition jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(definition -> 'trigger' ->> 'type' = 'beforeWrite', false)
$$;

CREATE FUNCTION svc.write_hook_changed() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('tessera.dry_run', true) = pg_current_xact_id()::text THEN
        RETURN NULL;
    END IF;
    UPDATE svc.cache_version SET catalog = catalog + 1;
    PERFORM pg_notify('tessera_catalog', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER workflows_hooks_inserted AFTER INSERT ON svc.workflows
    FOR EACH ROW WHEN (svc.is_write_hook(NEW.published))
    EXECUTE FUNCTION svc.write_hook_changed();
CREATE TRIGGER workflows_hooks_updated AFTER UPDATE ON svc.workflows
    FOR EACH ROW WHEN ((svc.is_write_hook(OLD.published) OR svc.is_write_hook(NEW.published))
        AND (OLD.published IS DISTINCT FROM NEW.published OR OLD.enabled IS DISTINCT FROM NEW.enabled
             OR OLD.slug IS DISTINCT FROM NEW.slug))
    EXECUTE FUNCTION svc.write_hook_changed();
CREATE TRIGGER workflows_hooks_deleted AFTER DELETE ON svc.workflows
    FOR EACH ROW WHEN (svc.is_write_hook(OLD.published))
    EXECUTE FUNCTION svc.write_hook_changed();
