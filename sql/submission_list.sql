-- Newest first, one page; @after is the last id of the previous page. A tenant's page
-- is submission_list_by_metadata.sql's, on the key "@tenant". @phase (with @state
-- in_progress) selects an in-progress phase: paused; scheduled (not paused, before
-- not_before); running (anything else).
-- Citus: multi-shard read (U), ORDER BY and LIMIT pushed down.
SELECT s.id, s.state, s.chunks_total, s.chunks_done, s.chunks_failed, s.chunks_skipped, s.paused,
       s.priority, s.metadata, s.strategic_metadata, s.prefix, s.created_at, s.finished_at,
       s.failed_chunk_index, s.error, coalesce(l.on_failure, '"fail_submission"') AS on_failure, l.not_before, s.tenant
FROM opsq.submission_status s
LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
WHERE (@state::text IS NULL OR s.state = @state::text)
  AND (@phase::text IS NULL OR CASE @phase::text
        WHEN 'paused' THEN s.paused
        WHEN 'scheduled' THEN NOT s.paused AND coalesce(l.not_before > now(), false)
        ELSE NOT s.paused AND coalesce(l.not_before <= now(), true) END)
  AND s.id < coalesce(@after::bigint, 9223372036854775807)
ORDER BY s.id DESC
LIMIT @limit
