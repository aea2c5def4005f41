-- Start a dashboard session: the SHA-256 of its id, the admin key it was made with, ending
-- after @ttl_ms; sessions past their end go at the same time.
-- Citus: the coordinator's own tables.
WITH gone AS (
    DELETE FROM opsq.ui_sessions WHERE expires_at <= now()
)
INSERT INTO opsq.ui_sessions (id_sha256, key_id, expires_at)
VALUES (@id_sha256, @key_id, now() + make_interval(secs => @ttl_ms::bigint / 1000.0))
