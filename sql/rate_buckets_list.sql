-- The rate_limit buckets in use (not full again), the emptiest first, up to limit: what
-- the dashboard shows of the rates in force. level is the tokens now, out of capacity.
-- Citus: the coordinator's own tables.
SELECT key, value::text AS value, per_second, capacity,
       least(capacity, tokens + per_second * extract(epoch FROM now() - updated_at)::float8) AS level
FROM opsq.rate_buckets
WHERE tokens + per_second * extract(epoch FROM now() - updated_at)::float8 < capacity
ORDER BY level, key, value
LIMIT @limit
