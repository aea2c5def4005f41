-- Reads a schedule's last @limit runs, the latest scheduled first.
-- Citus: the coordinator's own tables.
SELECT scheduled_at, outcome, coalesce(submission_id, 0) AS submission_id, error, attempts, at
FROM opsq.schedule_runs
WHERE schedule_id = @id
ORDER BY scheduled_at DESC
LIMIT @limit
