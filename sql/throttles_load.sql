-- The throttles in force, what each instance caches: the value as the text of its JSON
-- (as a submission's strategic metadata reads), and how long each has left by the
-- database's clock, for the instance to count down on its own.
SELECT key, value::text AS value, tenant, until,
       (extract(epoch FROM until - now()) * 1e6)::bigint AS left_us
FROM opsq.throttles
WHERE until > now()
ORDER BY until DESC
LIMIT @limit
