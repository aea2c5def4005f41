SELECT id, state, chunks_total, chunks_done, chunks_failed, priority, metadata,
       strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error
FROM opsq.submission_status
WHERE id = @id
