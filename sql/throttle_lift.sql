-- Lifts the throttles of key = value (JSON): in every tenant when @every, else in each of
-- @tenants ('': the throttle of every tenant). Returns how many of those deleted were in
-- force (ended rows not yet collected go too, uncounted).
-- Citus: the coordinator's own tables.
WITH lifted AS (
    DELETE FROM opsq.throttles
    WHERE key = @key AND value = @value::jsonb AND (@every::boolean OR tenant = ANY (@tenants::text[]))
    RETURNING until
)
SELECT count(*) FILTER (WHERE until > now()) FROM lifted
