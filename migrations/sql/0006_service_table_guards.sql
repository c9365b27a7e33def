-- Rules of the service's own tables that hold however they are written: the
-- Admin API checks them first with friendlier errors, and the Data API may
-- expose these tables to delegated administrators.

-- Once an active member of Administrators exists, one remains. Checked at
-- commit, so a transaction may replace memberships (delete, then insert).
CREATE FUNCTION svc.keep_an_admin() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    admins CONSTANT uuid := '00000000-0000-7000-8000-000000000001';
    removed boolean;
BEGIN
    IF TG_TABLE_NAME = 'role_members' THEN
        removed := OLD.role_id = admins;
    ELSE
        removed := OLD.active AND EXISTS (
            SELECT 1 FROM svc.role_members m WHERE m.user_id = OLD.id AND m.role_id = admins);
    END IF;
    IF removed AND NOT EXISTS (
        SELECT 1 FROM svc.role_members m JOIN svc.users u ON u.id = m.user_id
        WHERE m.role_id = admins AND u.active
    ) THEN
        RAISE EXCEPTION 'the last active administrator cannot be removed or deactivated'
            USING ERRCODE = 'TS409';
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER keep_an_admin AFTER DELETE OR UPDATE ON svc.role_members
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION svc.keep_an_admin();
CREATE CONSTRAINT TRIGGER keep_an_admin AFTER UPDATE OF active ON svc.users
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION svc.keep_an_admin();

-- Built-in roles keep their name, access and existence.
CREATE FUNCTION svc.keep_built_in_roles() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.built_in AND (TG_OP = 'DELETE'
        OR NEW.name <> OLD.name OR NEW.api_access <> OLD.api_access
        OR NEW.admin_access <> OLD.admin_access OR NOT NEW.built_in OR NEW.id <> OLD.id) THEN
        RAISE EXCEPTION 'built-in roles keep their name and access and cannot be deleted'
            USING ERRCODE = 'TS409';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER keep_built_in_roles BEFORE UPDATE OR DELETE ON svc.roles
    FOR EACH ROW EXECUTE FUNCTION svc.keep_built_in_roles();
