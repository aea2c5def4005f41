-- Newest first through the (key, value, submission_id) primary key of strategic_metadata:
-- a backward index scan, each row joined to its submission by primary key. A tenant's
-- submissions are those with "@tenant" = the tenant (migrations/00009_tenants.sql);
-- @tenant (NULL: any) confines a page by another key to one tenant; @phase is as in
-- submission_list.sql.
-- Citus: multi-shard read (U) joined with the reference table on each node, ORDER BY and
-- LIMIT pushed down.
SELECT s.id, s.state, s.chunks_total, s.chunks_done, s.chunks_failed, s.chunks_skipped, s.paused,
       s.priority, s.metadata, s.strategic_metadata, s.prefix, s.created_at, s.finished_at,
       s.failed_chunk_index, s.error, coalesce(l.on_failure, '"fail_submission"') AS on_failure, l.not_before, s.tenant
FROM opsq.strategic_metadata m
JOIN opsq.submission_status s ON s.id = m.submission_id
LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
WHERE m.key = @key
  AND m.value = @value::jsonb
  AND m.submission_id < coalesce(@after::bigint, 9223372036854775807)
  AND (@state::text IS NULL OR s.state = @state::text)
  AND (@phase::text IS NULL OR CASE @phase::text
        WHEN 'paused' THEN s.paused
        WHEN 'scheduled' THEN NOT s.paused AND coalesce(l.not_before > now(), false)
        ELSE NOT s.paused AND coalesce(l.not_before <= now(), true) END)
  AND (@tenant::text IS NULL OR s.tenant = @tenant::text)
ORDER BY m.submission_id DESC
LIMIT @limit
