-- A snapshot diff (a dry run, rolled back) writes the new rows later steps
-- look up: a grant of an existing role, a DataView of an existing table.
-- Checked at once, each such row's foreign key locks the row it names
-- (FOR KEY SHARE), and a session deleting that role or table would wait
-- for the diff (API.md 17: a diff blocks nobody). The service tables'
-- foreign keys become DEFERRABLE, still checked at once everywhere else
-- (INITIALLY IMMEDIATE); a diff defers them (SET CONSTRAINTS ALL
-- DEFERRED), so their checks wait for a commit that never comes and take
-- no lock. Cascades and other referential actions are not deferred.
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT c.conname, c.conrelid::regclass AS tbl
        FROM pg_constraint c
        JOIN pg_namespace n ON n.oid = c.connamespace
        WHERE c.contype = 'f' AND n.nspname = 'svc' AND NOT c.condeferrable
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER CONSTRAINT %I DEFERRABLE INITIALLY IMMEDIATE',
                       fk.tbl, fk.conname);
    END LOOP;
END
$$;
