-- Lock the row of a submission whose pending chunks are being skipped by slices, before a
-- slice of them is moved (chunks_skip_range.sql): cancelled (@failed false,
-- queuer/internal/submissions/cancel.go) or failed (@failed true, a fail of one of its chunks that
-- failed it, queuer/internal/outcome/fail.go). No row back: it is no longer so (a retry made it in
-- progress again, and moved back the chunks skipped so far): the slices stop. A retry
-- locks the same row first (submission_lock_any.sql), so the two happen one after the
-- other. One row back: the error the skipped chunks record, as the move in one statement
-- records it: 'submission cancelled', or the failed submission's error.
-- Citus: has a Citus form, submission_ended_lock_citus.sql (layout.go): one router
-- statement per table.
WITH cancelled AS (
    SELECT 'submission cancelled'::text AS error FROM opsq.submissions_cancelled
    WHERE id = @id AND NOT @failed::boolean
    FOR UPDATE
), failed AS (
    SELECT error FROM opsq.submissions_failed
    WHERE id = @id AND @failed::boolean
    FOR UPDATE
)
SELECT error FROM cancelled
UNION ALL
SELECT error FROM failed
