-- A waiting child's parents let it start: it waits no more (its caller, holding its lock,
-- then moves its held chunks in as a resume does, submission_resume.sql, unless it is
-- paused; and completes it if it has no chunks). No row when it was not waiting (another
-- instance started or cancelled it); else the child's chunks_total.
-- Citus: has a Citus form in layout.go (dependent_start_citus.sql): Citus does not join the coordinator's submission_after and submission_parents to the distributed submissions here.
UPDATE opsq.submission_after a SET waiting = false
WHERE a.id = @id AND a.waiting
RETURNING (SELECT s.chunks_total FROM opsq.submissions s WHERE s.id = a.id)
