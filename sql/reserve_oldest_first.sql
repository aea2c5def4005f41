-- Candidates for oldest_first: oldest submission first, chunk order within it.
SELECT submission_id, chunk_index, shard, retries, input, random_order
FROM opsq.chunks
WHERE shard = ANY(@shards::int[])
  AND (submission_id, chunk_index) > (@after_submission::bigint, @after_chunk::int)
ORDER BY submission_id, chunk_index
LIMIT @limit
