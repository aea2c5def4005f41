-- Deletes the rate buckets that are full again: a bucket asked for later is made full.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.rate_buckets
WHERE tokens + per_second * extract(epoch FROM now() - updated_at)::float8 >= capacity
