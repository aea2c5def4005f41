-- Records a schedule's last submission (a trigger's or a backfill's), which its next run's
-- overlap policy looks at.
-- Citus: the coordinator's own tables.
UPDATE opsq.schedules SET last_submission_id = @submission_id WHERE id = @id
