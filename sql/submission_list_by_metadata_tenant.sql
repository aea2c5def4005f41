-- A tenant's page by another key, newest first: a backward scan of the tenant's own
-- ("@tenant" = @tenant_value) rows of the strategic_metadata primary key, each checked for
-- @key = @value by a probe of that same key and joined to its submission. Its cost grows
-- with the tenant's own submissions only, never with another tenant's that match the key
-- (submission_list_by_metadata.sql, which walks every tenant's rows of the key, would tell
-- a producer by its time how many another tenant has: issue 31, finding 10). @phase is as
-- in submission_list.sql.
-- Citus: multi-shard read (U) joined with the reference table on each node; not yet run there.
SELECT s.id, s.state, s.chunks_total, s.chunks_done, s.chunks_failed, s.chunks_skipped, s.paused,
       s.priority, s.metadata, s.strategic_metadata, s.prefix, s.created_at, s.finished_at,
       s.failed_chunk_index, s.error, coalesce(l.on_failure, '"fail_submission"') AS on_failure, l.not_before, s.tenant
FROM opsq.strategic_metadata t
JOIN opsq.submission_status s ON s.id = t.submission_id
LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
WHERE t.key = '@tenant'
  AND t.value = @tenant_value::jsonb
  AND t.submission_id < coalesce(@after::bigint, 9223372036854775807)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m
              WHERE m.key = @key AND m.value = @value::jsonb AND m.submission_id = t.submission_id)
  AND (@state::text IS NULL OR s.state = @state::text)
  AND (@phase::text IS NULL OR CASE @phase::text
        WHEN 'paused' THEN s.paused
        WHEN 'scheduled' THEN NOT s.paused AND coalesce(l.not_before > now(), false)
        ELSE NOT s.paused AND coalesce(l.not_before <= now(), true) END)
ORDER BY t.submission_id DESC
LIMIT @limit
