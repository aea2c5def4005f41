-- Records a schedule's last submission (a trigger's or a backfill's), which its next run's
-- overlap policy looks at.
UPDATE opsq.schedules SET last_submission_id = @submission_id WHERE id = @id
