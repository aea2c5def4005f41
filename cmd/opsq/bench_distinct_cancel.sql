-- opsq bench, distinct: cancel the workload's submissions (ids @first to @last) at once,
-- as DELETE /v1/submissions/{id} would one by one, and delete their reservable chunks.
WITH chunks AS (
    DELETE FROM opsq.chunks WHERE submission_id BETWEEN @first AND @last
), moved AS (
    DELETE FROM opsq.submissions WHERE id BETWEEN @first AND @last
    RETURNING id, chunks_total, chunks_done, priority, max_retries, metadata,
              strategic_metadata, prefix, created_at
)
INSERT INTO opsq.submissions_cancelled
    (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
     prefix, created_at, finished_at)
SELECT id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
       prefix, created_at, now()
FROM moved
