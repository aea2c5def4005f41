-- Forget instances silent for longer than @stale, so that their node ids can be reused.
DELETE FROM opsq.instances
WHERE heartbeat_at < now() - @stale::interval
