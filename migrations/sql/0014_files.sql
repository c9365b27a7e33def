-- Files: the records of uploaded files (their bytes live in the file storage,
-- one object per id). A hidden resource: `/api/files` reads and writes it
-- under grants on `svc.files` (row filters such as owner_id = $USER.id).

CREATE TABLE svc.files (
    id           uuid PRIMARY KEY,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    content_type text NOT NULL CHECK (length(content_type) BETWEEN 1 AND 200),
    size         bigint NOT NULL CHECK (size >= 0),
    sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    visibility   text NOT NULL DEFAULT 'PRIVATE' CHECK (visibility IN ('PRIVATE', 'PUBLIC')),
    owner_id     uuid REFERENCES svc.users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_owner_idx ON svc.files (owner_id);

INSERT INTO svc.resources (id, schema_name, table_name) VALUES
    ('00000000-0000-7000-8000-000000000105', 'svc', 'files');
