-- On Citus, submissions_finish_completed.sql for one submission, as three router
-- statements (a CTE that inserts is never routed): its row copied to the table of its
-- end, completed or failed, then deleted from submissions. Each carries the same "every
-- chunk finished" condition, so a submission not finished is neither copied nor deleted.
-- Citus: router (U, by @id); submissions, submissions_completed, submissions_failed and
-- chunks_failed are co-located.
INSERT INTO opsq.submissions_completed
    (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
     strategic_metadata, prefix, created_at, finished_at, tenant)
SELECT id, chunks_total, chunks_done, 0, chunks_skipped, priority, max_retries, metadata, strategic_metadata,
       prefix, created_at, now(), tenant
FROM opsq.submissions
WHERE id = @id::bigint AND chunks_done + chunks_failed + chunks_skipped = chunks_total
  AND chunks_failed = 0 AND chunks_skipped = 0;
-- next statement
INSERT INTO opsq.submissions_failed
    (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
     strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error, tenant, paused)
SELECT m.id, m.chunks_total, m.chunks_done, m.chunks_failed, m.chunks_skipped, m.priority, m.max_retries,
       m.metadata, m.strategic_metadata, m.prefix, m.created_at, now(),
       coalesce(l.chunk_index, (SELECT min(f.chunk_index) FROM opsq.chunks_failed f WHERE f.submission_id = @id::bigint)),
       coalesce(l.error, m.chunks_skipped || ' chunks skipped'), m.tenant, m.paused
FROM opsq.submissions m
LEFT JOIN LATERAL (
    SELECT f.chunk_index, f.error FROM opsq.chunks_failed f
    WHERE f.submission_id = m.id AND f.submission_id = @id::bigint AND NOT f.skipped
    ORDER BY f.failed_at DESC, f.chunk_index DESC LIMIT 1
) l ON true
WHERE m.id = @id::bigint AND m.chunks_done + m.chunks_failed + m.chunks_skipped = m.chunks_total
  AND (m.chunks_failed > 0 OR m.chunks_skipped > 0);
-- next statement
DELETE FROM opsq.submissions
WHERE id = @id::bigint AND chunks_done + chunks_failed + chunks_skipped = chunks_total
