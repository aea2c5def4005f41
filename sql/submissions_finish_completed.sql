-- Move submissions whose every chunk is done to submissions_completed.
-- The same move of a submission row as submission_cancel.sql and
-- chunk_fail.sql: one statement per ending, each with its own condition and
-- target; a column added to opsq.submissions goes into all three.
WITH moved AS (
    DELETE FROM opsq.submissions
    WHERE id = ANY(@ids::bigint[]) AND chunks_done = chunks_total
    RETURNING id, chunks_total, chunks_done, priority, max_retries, metadata,
              strategic_metadata, prefix, created_at
)
INSERT INTO opsq.submissions_completed
    (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
     prefix, created_at, finished_at)
SELECT id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
       prefix, created_at, now()
FROM moved
RETURNING id
