-- Schema evolution (API.md section 12): a partial index's filter, kept as
-- submitted so the index reads back as that filter.
ALTER TABLE svc.resources ADD COLUMN index_filters jsonb NOT NULL DEFAULT '{}';
