-- Move an in-progress submission to submissions_cancelled, with its pause (a retry restores
-- it, migrations/00021). No row back: it is not in
-- progress (finished already, or unknown). One row back: its chunks_total, and how many of
-- its chunks are pending (neither done nor failed: reservable, reserved or waiting).
-- A submission with at most @skip_now chunks pending has them all counted skipped: the
-- caller moves them in this transaction (chunks_skip_submission.sql). One with more keeps
-- its count of skipped chunks: the caller moves them by slices after this commits, each
-- slice counted as it moves (chunks_skip_range.sql), so that no transaction holds more
-- than a slice (queuer/internal/submissions/cancel.go).
-- The same move of a submission row as submissions_finish_completed.sql and
-- chunk_fail.sql: one statement per ending, each with its own condition and
-- target; a column added to opsq.submissions goes into all three (and into
-- submission_reopen.sql, the way back).
-- Citus: CTEs run as subplans: the coordinator's holds, a router delete (U, by @id) whose
-- row passes through the coordinator into a router insert (U).
WITH holds AS (
    DELETE FROM opsq.simultaneous_holds WHERE submission_id = @id
), moved AS (
    DELETE FROM opsq.submissions WHERE id = @id
    RETURNING id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
              strategic_metadata, prefix, created_at, tenant, paused
)
-- Every chunk not done nor failed is skipped (chunks_skip_submission.sql moves them).
INSERT INTO opsq.submissions_cancelled
    (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
     strategic_metadata, prefix, created_at, finished_at, tenant, paused)
SELECT id, chunks_total, chunks_done, chunks_failed,
       CASE WHEN chunks_total - chunks_done - chunks_failed <= @skip_now::bigint
            THEN chunks_total - chunks_done - chunks_failed ELSE chunks_skipped END, priority,
       max_retries, metadata, strategic_metadata, prefix, created_at, now(), tenant, paused
FROM moved
RETURNING id, chunks_total, chunks_total - chunks_done - chunks_failed AS pending
