-- Keeps the @keep runs of a schedule recorded last and deletes the older ones.
-- Citus: the coordinator's own tables.
DELETE FROM opsq.schedule_runs
WHERE schedule_id = @id AND (at, scheduled_at) < (
    SELECT at, scheduled_at FROM opsq.schedule_runs WHERE schedule_id = @id
    ORDER BY at DESC, scheduled_at DESC OFFSET @keep - 1 LIMIT 1)
