SELECT * FROM (
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_0::int
  AND (c.random_order, c.submission_id, c.chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND c.random_order < @before_order::int
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit)
UNION ALL
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_1::int
  AND (c.random_order, c.submission_id, c.chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND c.random_order < @before_order::int
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit)
UNION ALL
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_2::int
  AND (c.random_order, c.submission_id, c.chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND c.random_order < @before_order::int
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit)
) c
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit
-- @shard_0 = 0
-- @shard_1 = 7
-- @shard_2 = 63
