-- Creates a schedule of a tenant unless the tenant has @max of them already or one of the
-- same name. id is null when nothing was inserted: taken says the name is in use (also
-- when a concurrent create took it first), count how many the tenant has. Runs after schedule_tenant_lock.sql in one
-- transaction: without it the counts of two creates at once see neither and both insert.
-- Citus: the coordinator's own tables.
WITH n AS (
    SELECT count(*) AS count, coalesce(bool_or(name = @name), false) AS taken
    FROM opsq.schedules WHERE tenant = @tenant
), ins AS (
    INSERT INTO opsq.schedules (tenant, name, cron, timezone, template, plan, overlap, catch_up,
        paused, created_by, next_run_at)
    SELECT @tenant, @name, @cron, @timezone, @template, @plan, @overlap, @catch_up,
        @paused, @created_by, @next_run_at
    FROM n WHERE n.count < @max AND NOT n.taken
    ON CONFLICT (tenant, name) DO NOTHING
    RETURNING id
)
SELECT (SELECT id FROM ins) AS id, n.count, n.taken OR ((SELECT id FROM ins) IS NULL AND n.count < @max) AS taken
FROM n
