-- Candidates for newest_first: newest submission first (its chunks from the last one back:
-- a backward scan of the same index as oldest_first).
SELECT submission_id, chunk_index, shard, retries, input, random_order
FROM opsq.chunks
WHERE shard = ANY(@shards::int[])
  AND (submission_id, chunk_index) < (@after_submission::bigint, @after_chunk::int)
ORDER BY submission_id DESC, chunk_index DESC
LIMIT @limit
