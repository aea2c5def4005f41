-- Which of @times a schedule has a submitted run recorded for (a backfill skips them).
-- Citus: the coordinator's own tables.
SELECT scheduled_at FROM opsq.schedule_runs
WHERE schedule_id = @id AND scheduled_at = ANY(@times::timestamptz[]) AND outcome = 'submitted'
