-- Move a finished submission (failed, cancelled; completed never has anything to retry)
-- back to opsq.submissions, in progress, for a retry: its finished_at, failed_chunk_index
-- and error go, the chunks the retry made pending again are uncounted, and its attempt
-- budget is set (@max_retries NULL: unchanged). It is paused if it was cancelled or failed
-- while paused (migrations/00021, 00024), and not otherwise: a retry never lifts a pause. The inverse of the moves
-- of submission_cancel.sql, submissions_finish_completed.sql and chunk_fail.sql: a column
-- added to opsq.submissions goes here too. No row back: it is in none of those tables.
-- Citus: CTEs run as subplans, each router (U, by @id); the moved row passes through the
-- coordinator.
WITH gone_failed AS (
    DELETE FROM opsq.submissions_failed WHERE id = @id
    RETURNING id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority,
              max_retries, metadata, strategic_metadata, prefix, created_at, tenant, paused
), gone_cancelled AS (
    DELETE FROM opsq.submissions_cancelled WHERE id = @id
    RETURNING id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority,
              max_retries, metadata, strategic_metadata, prefix, created_at, tenant, paused
), gone_completed AS (
    DELETE FROM opsq.submissions_completed WHERE id = @id
    RETURNING id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority,
              max_retries, metadata, strategic_metadata, prefix, created_at, tenant, false AS paused
), gone AS (
    SELECT * FROM gone_failed
    UNION ALL SELECT * FROM gone_cancelled
    UNION ALL SELECT * FROM gone_completed
)
INSERT INTO opsq.submissions
    (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries,
     metadata, strategic_metadata, prefix, created_at, tenant, paused)
SELECT id, chunks_total, chunks_done, greatest(chunks_failed - @failed::int, 0),
       greatest(chunks_skipped - @skipped::int, 0), priority,
       coalesce(@max_retries::int, max_retries), metadata, strategic_metadata, prefix, created_at, tenant, paused
FROM gone
RETURNING id
