-- Replaces a schedule's definition (PUT): its next run starts over from @next_run_at, a
-- failed run's retries and any lease end. Its runs so far stay. No row: no such schedule.
-- Citus: the coordinator's own tables.
UPDATE opsq.schedules
SET cron = @cron, timezone = @timezone, template = @template, plan = @plan, overlap = @overlap,
    catch_up = @catch_up, paused = @paused, next_run_at = @next_run_at, attempts = 0,
    retry_at = NULL, lease_id = NULL, lease_until = NULL, updated_at = now()
WHERE tenant = @tenant AND name = @name
RETURNING id
