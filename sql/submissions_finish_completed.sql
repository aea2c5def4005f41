-- Move submissions whose every chunk is finished (done + failed + skipped = total) to
-- submissions_completed, or, when any chunk failed (on_failure "continue" or "fail_after")
-- or was skipped (a retry of a failed submission's failed chunks only leaves its skipped
-- ones skipped), to submissions_failed, naming the last chunk that failed and its error
-- (when only skipped chunks are left: the first of them, and an error that says so).
-- The same move of a submission row as submission_cancel.sql and
-- chunk_fail.sql: one statement per ending, each with its own condition and
-- target; a column added to opsq.submissions goes into all three (and into
-- submission_reopen.sql, the way back).
-- Citus: has a Citus form, submission_finish_one.sql per id (layout.go): as it is, its CTE
-- that inserts and its lateral join are refused.
WITH moved AS (
    DELETE FROM opsq.submissions
    WHERE id = ANY(@ids::bigint[]) AND chunks_done + chunks_failed + chunks_skipped = chunks_total
    RETURNING id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
              strategic_metadata, prefix, created_at, tenant, paused
), completed AS (
    INSERT INTO opsq.submissions_completed
        (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, tenant)
    SELECT id, chunks_total, chunks_done, 0, chunks_skipped, priority, max_retries, metadata, strategic_metadata,
           prefix, created_at, now(), tenant
    FROM moved
    WHERE chunks_failed = 0 AND chunks_skipped = 0
    RETURNING id
), failed AS (
    INSERT INTO opsq.submissions_failed
        (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error, tenant, paused)
    SELECT m.id, m.chunks_total, m.chunks_done, m.chunks_failed, m.chunks_skipped, m.priority, m.max_retries,
           m.metadata, m.strategic_metadata, m.prefix, m.created_at, now(),
           coalesce(l.chunk_index, (SELECT min(f.chunk_index) FROM opsq.chunks_failed f WHERE f.submission_id = m.id)),
           coalesce(l.error, m.chunks_skipped || ' chunks skipped'), m.tenant, m.paused
    FROM moved m
    LEFT JOIN LATERAL (
        SELECT f.chunk_index, f.error FROM opsq.chunks_failed f
        WHERE f.submission_id = m.id AND NOT f.skipped
        ORDER BY f.failed_at DESC, f.chunk_index DESC LIMIT 1
    ) l ON true
    WHERE m.chunks_failed > 0 OR m.chunks_skipped > 0
    RETURNING id
)
SELECT id FROM completed UNION ALL SELECT id FROM failed
