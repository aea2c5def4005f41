-- How many throttles are in force, other than key = value, in each of @tenants ('': the
-- throttles of every tenant) and set by the API key @set_by (none for ''), and how long
-- until the first of each ends: what a new throttle of key = value is counted against.
-- A throttle of a key over several tenants counts once for the key.
-- Citus: the coordinator's own tables.
SELECT 'tenant' AS scope, t AS name, count(h.key) AS n,
       coalesce((extract(epoch FROM min(h.until) - now()) * 1e6)::bigint, 0) AS first_end_us
FROM unnest(@tenants::text[]) AS t
LEFT JOIN opsq.throttles h
    ON h.tenant = t AND h.until > now() AND NOT (h.key = @key AND h.value = @value::jsonb)
GROUP BY t
UNION ALL
SELECT 'key', @set_by, count(DISTINCT (h.key, h.value)),
       coalesce((extract(epoch FROM min(h.until) - now()) * 1e6)::bigint, 0)
FROM opsq.throttles h
WHERE @set_by <> '' AND h.set_by = @set_by AND h.until > now() AND NOT (h.key = @key AND h.value = @value::jsonb)
