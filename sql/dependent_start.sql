-- A waiting child's parents let it start: it waits no more (its caller, holding its lock,
-- then moves its held chunks in as a resume does, submission_resume.sql, unless it is
-- paused). No row when it was not waiting (another instance started or cancelled it).
UPDATE opsq.submission_after SET waiting = false
WHERE id = @id AND waiting
RETURNING id
