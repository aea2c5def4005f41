-- Leases up to want tokens of a rate_limit bucket, giving back returned unused ones.
-- Citus: a function of the coordinator over its own tables.
SELECT opsq.take_rate_tokens(@key, @value::jsonb, @per_second, @capacity, @want, @returned)
