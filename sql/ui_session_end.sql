-- End a dashboard session (logout).
DELETE FROM opsq.ui_sessions WHERE id_sha256 = @id_sha256
