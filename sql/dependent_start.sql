-- A waiting child's parents let it start: it waits no more (its caller, holding its lock,
-- then moves its held chunks in as a resume does, submission_resume.sql, unless it is
-- paused; and completes it if it has no chunks). No row when it was not waiting (another
-- instance started or cancelled it); else the child's chunks_total.
-- Citus: the coordinator's own tables (submission_after, submission_parents); joined to distributed ones (U) by Citus's local-distributed join; not yet run there.
UPDATE opsq.submission_after a SET waiting = false
WHERE a.id = @id AND a.waiting
RETURNING (SELECT s.chunks_total FROM opsq.submissions s WHERE s.id = a.id)
