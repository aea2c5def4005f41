-- Throttles key = value (JSON) for for_us microseconds from now, in each of tenants ('':
-- every tenant), set by the API key @set_by; a throttle in force that ends later keeps its
-- end and its setter. Returns the earliest end of the rows set.
-- Citus: the coordinator's own tables.
WITH set AS (
    INSERT INTO opsq.throttles (key, value, tenant, until, set_by, set_at)
    SELECT @key, @value::jsonb, t, now() + make_interval(secs => @for_us::bigint / 1e6), @set_by, now()
    FROM unnest(@tenants::text[]) AS t
    ON CONFLICT (key, value, tenant) DO UPDATE SET
        until  = greatest(opsq.throttles.until, excluded.until),
        set_by = CASE WHEN excluded.until > opsq.throttles.until THEN excluded.set_by ELSE opsq.throttles.set_by END,
        set_at = CASE WHEN excluded.until > opsq.throttles.until THEN excluded.set_at ELSE opsq.throttles.set_at END
    RETURNING until
)
SELECT min(until) FROM set
