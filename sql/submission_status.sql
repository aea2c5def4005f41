-- Citus: router (U, by @id; the view's tables and submission_lifecycle are co-located).
SELECT s.id, s.state, s.chunks_total, s.chunks_done, s.chunks_failed, s.chunks_skipped, s.paused,
       s.priority, s.metadata, s.strategic_metadata, s.prefix, s.created_at, s.finished_at,
       s.failed_chunk_index, s.error, coalesce(l.on_failure, '"fail_submission"') AS on_failure, l.not_before, s.tenant
FROM opsq.submission_status s
LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
WHERE s.id = @id
