-- Read-your-writes over streaming replicas (docs/operations.md, "Read
-- replicas"): each Data API write, while replicas serve reads, notes its
-- transaction here in the same statement. A read by the same user goes to a
-- replica only when every noted transaction is visible there.
--
-- One row per user and server process (`backend`, the writing connection's
-- pid): two transactions of one user on two connections never wait for one
-- another's row, and a connection's earlier writes committed before its
-- latest one, so the latest covers them. `lsn` (where the write's WAL
-- stood, a little before its commit) lets the instance pick a replica that
-- has likely replayed it; the check itself is the transaction's visibility.
-- Rows older than ten minutes (from the write's last statement) are swept (a replica that far behind is
-- never read from).
CREATE TABLE svc.write_marks (
    user_id uuid NOT NULL,
    backend integer NOT NULL,
    xid     xid8 NOT NULL,
    lsn     pg_lsn NOT NULL,
    at      timestamptz NOT NULL,
    PRIMARY KEY (user_id, backend)
);
CREATE INDEX write_marks_at_idx ON svc.write_marks (at);

-- A row filter's `$USER.email`, `.name`, `.email_verified` and
-- `.updated_at` are read
-- from svc.users by the read's own statement: on a replica they must be as
-- current as the versions that statement checks, so changing them moves
-- the auth version too.
DROP TRIGGER users_version ON svc.users;
CREATE TRIGGER users_version
    AFTER UPDATE OF active, timezone, email, name, email_verified, updated_at OR DELETE OR TRUNCATE ON svc.users
    FOR EACH STATEMENT EXECUTE FUNCTION svc.bump_cache_version('auth');
