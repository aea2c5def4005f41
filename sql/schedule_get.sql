-- Reads one schedule of a tenant. No row: no such schedule.
-- Citus: the coordinator's own tables.
SELECT id, tenant, name, cron, timezone, template, plan, overlap, catch_up, paused, created_by,
    created_at, updated_at, next_run_at, attempts, retry_at, last_submission_id
FROM opsq.schedules
WHERE tenant = @tenant AND name = @name
