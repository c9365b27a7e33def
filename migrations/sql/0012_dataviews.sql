-- DataViews and dashboards (API.md sections 7 and 8): saved read-only
-- queries with a draft and a published snapshot, their read grants, and
-- dashboards of widgets over them.

CREATE TABLE svc.dataviews (
    id           uuid PRIMARY KEY,
    slug         text NOT NULL UNIQUE,
    name         text NOT NULL,
    -- The definition being edited: { source, columns, filter, sort, limit }.
    draft        jsonb NOT NULL,
    -- What /api/views/{slug} serves; null until the first publish.
    published    jsonb,
    published_at timestamptz,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- Published views are cached with the catalog: a change of what is served
-- moves the catalog version and tells every instance.
CREATE TRIGGER dataviews_version AFTER UPDATE OF slug, published OR DELETE OR TRUNCATE ON svc.dataviews
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('catalog');
CREATE TRIGGER dataviews_changed AFTER UPDATE OF slug, published OR DELETE OR TRUNCATE ON svc.dataviews
    FOR EACH STATEMENT EXECUTE FUNCTION svc.notify_catalog();

-- A grant names exactly one of a resource, a workflow or a DataView; a
-- DataView grant reads.
ALTER TABLE svc.grants ADD COLUMN data_view_id uuid REFERENCES svc.dataviews (id) ON DELETE CASCADE;
ALTER TABLE svc.grants DROP CONSTRAINT grants_check;
ALTER TABLE svc.grants ADD CONSTRAINT grants_one_target CHECK (
    num_nonnulls(resource_id, workflow_id, data_view_id) = 1);
ALTER TABLE svc.grants ADD CONSTRAINT grants_view_reads CHECK (
    data_view_id IS NULL OR action = 'read');
CREATE INDEX grants_dataview_idx ON svc.grants (data_view_id) WHERE data_view_id IS NOT NULL;

CREATE TABLE svc.dashboards (
    id         uuid PRIMARY KEY,
    slug       text NOT NULL UNIQUE,
    name       text NOT NULL,
    -- Seconds between refreshes of the page; null: no refresh.
    refresh_seconds integer CHECK (refresh_seconds BETWEEN 5 AND 86400),
    -- [ { id, type, title, dataViewId, x, y, layout: { col, row, w, h } } ]
    widgets    jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- A bucket's start as ISO 8601 with the zone's offset at that instant
-- (`2026-03-29T00:00:00+13:00`), the way a caller in `zone` reads it.
CREATE FUNCTION svc.iso_in_zone(at timestamptz, zone text) RETURNS text
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
    SELECT to_char(at AT TIME ZONE zone, 'YYYY-MM-DD"T"HH24:MI:SS')
        || CASE WHEN o < interval '0' THEN '-' ELSE '+' END
        || to_char(CASE WHEN o < interval '0' THEN -o ELSE o END, 'HH24:MI')
    FROM (SELECT (at AT TIME ZONE zone) - (at AT TIME ZONE 'UTC') AS o) AS offset_of
$$;
