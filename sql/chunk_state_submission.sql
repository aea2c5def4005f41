-- On Citus, the part of chunk_state.sql on its submission's node: the submission in
-- progress (its max_retries, and whether the chunk is one of its), the chunk among the
-- failed, or the submission ended. One row per table that knows it.
-- Citus: router (U, by @submission_id; the five tables are co-located).
SELECT 'in_progress' AS kind, max_retries, @chunk_index::int < chunks_total AS counted
FROM opsq.submissions WHERE id = @submission_id::bigint
UNION ALL
SELECT 'failed_chunk', 0, true FROM opsq.chunks_failed
WHERE submission_id = @submission_id::bigint AND chunk_index = @chunk_index::int
UNION ALL
SELECT 'ended', 0, true FROM opsq.submissions_completed WHERE id = @submission_id::bigint
UNION ALL
SELECT 'ended', 0, true FROM opsq.submissions_failed WHERE id = @submission_id::bigint
UNION ALL
SELECT 'ended', 0, true FROM opsq.submissions_cancelled WHERE id = @submission_id::bigint
