-- Lock a submission's row in whichever of the four tables it is, and read its state and
-- whether it is paused: a retry, a pause or a resume and a concurrent cancel, fail or
-- completion of the submission then happen one after the other. No row back: it is
-- unknown, or it moved to another table while this statement waited for its lock (the
-- other tables were read before the move): run it again.
WITH in_progress AS (
    SELECT 'in_progress'::text AS state, s.paused FROM opsq.submissions s WHERE s.id = @id FOR UPDATE
), completed AS (
    SELECT 'completed'::text AS state, false AS paused FROM opsq.submissions_completed s WHERE s.id = @id FOR UPDATE
), failed AS (
    SELECT 'failed'::text AS state, false AS paused FROM opsq.submissions_failed s WHERE s.id = @id FOR UPDATE
), cancelled AS (
    SELECT 'cancelled'::text AS state, false AS paused FROM opsq.submissions_cancelled s WHERE s.id = @id FOR UPDATE
)
SELECT state, paused FROM in_progress
UNION ALL SELECT state, paused FROM completed
UNION ALL SELECT state, paused FROM failed
UNION ALL SELECT state, paused FROM cancelled
