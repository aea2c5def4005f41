-- The ingests by slices whose instance is gone (migration 00015): not registered, a later
-- incarnation of its id, or silent for a minute. Oldest first, up to @limit.
-- Citus: the coordinator's own tables.
SELECT submission_id, chunk_count
FROM opsq.ingests i
WHERE NOT EXISTS (
    SELECT FROM opsq.instances n
    WHERE n.id = i.instance AND n.started_at <= i.started_at AND n.heartbeat_at > now() - interval '1 minute')
ORDER BY started_at
LIMIT @limit
