SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard IN (@shard_0::int)
  AND (c.submission_id, c.chunk_index) > (@after_submission::bigint, @after_chunk::int)
ORDER BY c.submission_id, c.chunk_index
LIMIT @limit
-- @shard_0 = 5
