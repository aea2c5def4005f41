-- End a dashboard session (logout).
-- Citus: the coordinator's own tables.
DELETE FROM opsq.ui_sessions WHERE id_sha256 = @id_sha256
