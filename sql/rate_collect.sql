-- Deletes the rate buckets that are full again: a bucket asked for later is made full.
DELETE FROM opsq.rate_buckets
WHERE tokens + per_second * extract(epoch FROM now() - updated_at)::float8 >= capacity
