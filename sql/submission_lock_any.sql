-- Lock a submission's row in whichever of the four tables it is, and read its state and
-- whether it is paused (a cancelled or failed one: whether it was when it ended, migrations/00021 and 00024): a retry, a pause or a resume and a concurrent cancel, fail or
-- completion of the submission then happen one after the other. No row back: it is
-- unknown, or it moved to another table while this statement waited for its lock (the
-- other tables were read before the move): run it again.
-- unmoved: the chunks of a submission cancelled or failed by slices that are still pending
-- where they were, not yet moved and counted skipped (queuer/internal/submissions/slices.go); 0
-- otherwise.
-- Citus: has a Citus form, submission_lock_any_citus.sql (layout.go): one router statement
-- per table.
WITH in_progress AS (
    SELECT 'in_progress'::text AS state, s.paused, 0::bigint AS unmoved FROM opsq.submissions s WHERE s.id = @id FOR UPDATE
), completed AS (
    SELECT 'completed'::text AS state, false AS paused, 0::bigint AS unmoved FROM opsq.submissions_completed s WHERE s.id = @id FOR UPDATE
), failed AS (
    SELECT 'failed'::text AS state, s.paused,
           (s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped)::bigint AS unmoved FROM opsq.submissions_failed s WHERE s.id = @id FOR UPDATE
), cancelled AS (
    SELECT 'cancelled'::text AS state, s.paused,
           (s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped)::bigint AS unmoved FROM opsq.submissions_cancelled s WHERE s.id = @id FOR UPDATE
)
SELECT state, paused, unmoved FROM in_progress
UNION ALL SELECT state, paused, unmoved FROM completed
UNION ALL SELECT state, paused, unmoved FROM failed
UNION ALL SELECT state, paused, unmoved FROM cancelled
