-- Versions of the state every instance caches, bumped in the transaction of
-- each change, so a request compares its caches with the database in the round
-- trip it already makes (API.md section 1, several instances):
--   auth     credentials, accounts, roles and role members (who a caller is);
--   catalog  resources, their exposure and columns (Tessera's DDL registers
--            every table it changes), and grants;
--   settings the runtime settings.
-- NOTIFY stays the fast path that drops a cache early; the versions decide.
CREATE TABLE svc.cache_version (
    id       boolean PRIMARY KEY DEFAULT true CHECK (id),
    auth     bigint NOT NULL,
    catalog  bigint NOT NULL,
    settings bigint NOT NULL
);
INSERT INTO svc.cache_version VALUES (true, 1, 1, 1);
-- One row: planned as one, never as a scan worth JIT.
ANALYZE svc.cache_version;

CREATE FUNCTION svc.bump_cache_version() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_ARGV[0] = 'auth' THEN
        UPDATE svc.cache_version SET auth = auth + 1;
    ELSIF TG_ARGV[0] = 'catalog' THEN
        UPDATE svc.cache_version SET catalog = catalog + 1;
    ELSE
        UPDATE svc.cache_version SET settings = settings + 1;
    END IF;
    RETURN NULL;
END
$$;

-- Raised inside a read planned on cached state that is no longer current:
-- the instance reloads and plans again.
CREATE FUNCTION svc.cache_current(current boolean) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF current IS NOT TRUE THEN
        RAISE EXCEPTION 'cached state is stale' USING ERRCODE = 'TS412';
    END IF;
    RETURN true;
END
$$;

-- A new session, token, account or role changes no cached answer; a change
-- or removal of one does.
CREATE TRIGGER sessions_version AFTER UPDATE OR DELETE OR TRUNCATE ON svc.sessions
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER api_tokens_version AFTER UPDATE OR DELETE OR TRUNCATE ON svc.api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER users_version AFTER UPDATE OF active, timezone OR DELETE OR TRUNCATE ON svc.users
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER roles_version AFTER UPDATE OR DELETE OR TRUNCATE ON svc.roles
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER role_members_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.role_members
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
CREATE TRIGGER resources_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.resources
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('catalog');
CREATE TRIGGER grants_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.grants
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('catalog');
CREATE TRIGGER settings_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON svc.settings
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('settings');
