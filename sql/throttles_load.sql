-- The throttles in force, what each instance caches: the value as the text of its JSON
-- (as a submission's strategic metadata reads), who set it and when, and how long each has
-- left by the database's clock, for the instance to count down on its own. All of them:
-- the bounds of a new throttle (throttle_bounds.sql) keep them few, and an instance that
-- left one out would hand out what it holds back.
-- Citus: the coordinator's own tables.
SELECT key, value::text AS value, tenant, until, set_by, set_at,
       (extract(epoch FROM until - now()) * 1e6)::bigint AS left_us
FROM opsq.throttles
WHERE until > now()
ORDER BY until DESC
