-- Bounded answers (data.max_answer_bytes), the rows themselves: every
-- whole answer PostgreSQL builds measures its rows as they are added
-- (a running sum beside each row's JSON); the row that would pass the
-- ceiling calls svc.answer_over, which fails the statement (TS413) before
-- the array holds more than the ceiling. This replaces the check of the
-- finished answer (svc.answer_whole).
DROP FUNCTION svc.answer_whole(text, bigint);

CREATE FUNCTION svc.answer_over() RETURNS text
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the answer is larger than data.max_answer_bytes' USING ERRCODE = 'TS413';
END
$$;

-- The counter of values holding related rows starts at zero whatever a
-- role's or database's default for it says.
CREATE OR REPLACE FUNCTION svc.answer_piece(piece json, counted bigint, cap bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    used bigint := greatest(coalesce(nullif(current_setting('tessera.answer_bytes', true), '')::bigint, 0), 0)
                   + greatest(coalesce(octet_length(piece::text), 0) - coalesce(counted, 0), 0);
BEGIN
    IF used > cap THEN
        RAISE EXCEPTION 'the answer is larger than data.max_answer_bytes' USING ERRCODE = 'TS413';
    END IF;
    PERFORM set_config('tessera.answer_bytes', used::text, true);
    RETURN piece;
END
$$;

-- A snapshot diff marks its own transaction (its id), so no default of a
-- role or database can turn the version bumps off for other changes.
CREATE OR REPLACE FUNCTION svc.bump_cache_version() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('tessera.dry_run', true) = pg_current_xact_id()::text THEN
        RETURN NULL;
    END IF;
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
