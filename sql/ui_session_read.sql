-- The key of a live dashboard session, by the SHA-256 of its id; no row when there is none
-- or it ended.
-- Citus: the coordinator's own tables.
SELECT key_id FROM opsq.ui_sessions WHERE id_sha256 = @id_sha256 AND expires_at > now()
