-- Pauses (@paused) or resumes a schedule. A resume starts its runs over from @next_run_at
-- (the runs a pause passed over are not made) and ends a failed run's retries. No row: no
-- such schedule.
-- Citus: the coordinator's own tables.
UPDATE opsq.schedules
SET paused = @paused,
    next_run_at = CASE WHEN paused AND NOT @paused THEN @next_run_at ELSE next_run_at END,
    attempts = CASE WHEN paused AND NOT @paused THEN 0 ELSE attempts END,
    retry_at = CASE WHEN paused AND NOT @paused THEN NULL ELSE retry_at END,
    updated_at = now()
WHERE tenant = @tenant AND name = @name
RETURNING id
