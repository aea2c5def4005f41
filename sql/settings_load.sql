-- Citus: the coordinator's own tables.
SELECT key, value FROM opsq.settings
