-- Throttles key = value (JSON) for for_us microseconds from now, in each of tenants ('':
-- every tenant); a throttle in force that ends later keeps its end. Returns the earliest
-- end of the rows set.
WITH set AS (
    INSERT INTO opsq.throttles (key, value, tenant, until)
    SELECT @key, @value::jsonb, t, now() + make_interval(secs => @for_us::bigint / 1e6)
    FROM unnest(@tenants::text[]) AS t
    ON CONFLICT (key, value, tenant) DO UPDATE SET until = greatest(opsq.throttles.until, excluded.until)
    RETURNING until
)
SELECT min(until) FROM set
