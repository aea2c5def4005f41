-- Fail a chunk for good, and with it its submission: the chunk goes to chunks_failed, the
-- submission's other chunks follow as skipped, the submission to submissions_failed.
-- @retries and @claimant guard the attempt and the claim as in chunk_retry.sql. One row
-- back: fence_held (false: the fence refused, nothing was written) and submission_id (NULL
-- when nothing was done).
-- The same move of a submission row as submission_cancel.sql and
-- submissions_finish_completed.sql: one statement per ending, each with its own condition and
-- target; a column added to opsq.submissions goes into all three.
WITH fence AS (
    SELECT @claimant::text IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = @shard AND sc.claimant = @claimant::text AND sc.generation = @generation::bigint) AS held
), target AS (
    SELECT c.submission_id, c.chunk_index, c.retries
    FROM opsq.chunks c
    WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
      AND c.retries = @retries
      AND (SELECT held FROM fence)
    FOR UPDATE
), sub AS (
    DELETE FROM opsq.submissions s
    WHERE s.id = (SELECT submission_id FROM target)
    RETURNING s.*
), gone AS (
    DELETE FROM opsq.chunks c
    WHERE c.submission_id = (SELECT id FROM sub)
    RETURNING c.submission_id, c.chunk_index, c.retries
), holds AS (
    DELETE FROM opsq.simultaneous_holds h WHERE h.submission_id = (SELECT id FROM sub)
), failed AS (
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped)
    SELECT g.submission_id, g.chunk_index, g.retries, @error, g.chunk_index <> @chunk_index
    FROM gone g
), moved AS (
    INSERT INTO opsq.submissions_failed
        (id, chunks_total, chunks_done, chunks_failed, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error)
    SELECT id, chunks_total, chunks_done, 1, priority, max_retries, metadata,
           strategic_metadata, prefix, created_at, now(), @chunk_index, @error
    FROM sub
    RETURNING id
)
SELECT f.held AS fence_held, m.id AS submission_id
FROM fence f LEFT JOIN moved m ON true
