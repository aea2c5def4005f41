-- Newest first, one page; @after is the last id of the previous page.
SELECT id, state, chunks_total, chunks_done, chunks_failed, priority, metadata,
       strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error
FROM opsq.submission_status
WHERE (@state::text IS NULL OR state = @state::text)
  AND id < coalesce(@after::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT @limit
