-- Bounded answers (data.max_answer_bytes), counted without taking back:
-- every value PostgreSQL builds that holds related rows (an array of
-- related rows, or a related row holding such arrays) adds its own bytes
-- to a transaction-local counter as it is built: its length less the
-- values inside it that were counted already. The counter only grows, so
-- every byte counts once and nesting cannot push it down; the statement
-- fails (TS413) as soon as it passes the ceiling. A whole answer is
-- checked once more before it is sent (svc.answer_whole).
DROP FUNCTION svc.answer_settle(json);
DROP FUNCTION svc.answer_piece(json, bigint);

CREATE FUNCTION svc.answer_piece(piece json, counted bigint, cap bigint) RETURNS json
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    used bigint := coalesce(nullif(current_setting('tessera.answer_bytes', true), '')::bigint, 0)
                   + greatest(coalesce(octet_length(piece::text), 0) - coalesce(counted, 0), 0);
BEGIN
    IF used > cap THEN
        RAISE EXCEPTION 'the answer is larger than data.max_answer_bytes' USING ERRCODE = 'TS413';
    END IF;
    PERFORM set_config('tessera.answer_bytes', used::text, true);
    RETURN piece;
END
$$;

CREATE FUNCTION svc.answer_whole(answer text, cap bigint) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF octet_length(answer) > cap THEN
        RAISE EXCEPTION 'the answer is larger than data.max_answer_bytes' USING ERRCODE = 'TS413';
    END IF;
    RETURN answer;
END
$$;

-- A snapshot diff (a dry run, rolled back) moves no shared-state version:
-- the version row is never locked by it, so no other session's change
-- waits for a diff to end.
CREATE OR REPLACE FUNCTION svc.bump_cache_version() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('tessera.dry_run', true) = 'on' THEN
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
