-- Forget instances silent for longer than @stale, so that their node ids can be reused.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.instances
WHERE heartbeat_at < now() - @stale::interval
