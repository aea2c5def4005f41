-- Reads the schedules of a tenant ('' for every tenant), by tenant and name, at most
-- @limit of them after (@after_tenant, @after_name).
-- Citus: the coordinator's own tables.
SELECT id, tenant, name, cron, timezone, template, plan, overlap, catch_up, paused, created_by,
    created_at, updated_at, next_run_at, attempts, retry_at, last_submission_id
FROM opsq.schedules
WHERE (@tenant = '' OR tenant = @tenant) AND (tenant, name) > (@after_tenant, @after_name)
ORDER BY tenant, name
LIMIT @limit
