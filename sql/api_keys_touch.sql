-- Record that keys were used (an instance does so at most once a minute per key). The
-- trigger on opsq.api_keys does not notify for last_used_at.
-- Citus: the coordinator's own tables.
UPDATE opsq.api_keys
SET last_used_at = now()
WHERE id = ANY(@ids::bigint[])
