-- Deletes the throttles that ended.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.throttles WHERE until < now()
