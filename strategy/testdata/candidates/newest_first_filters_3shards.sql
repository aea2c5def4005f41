SELECT * FROM (
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_0::int
  AND (c.submission_id, c.chunk_index) < (@after_submission::bigint, @after_chunk::int)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m0 WHERE m0.key = @filter_key_0 AND m0.value = @filter_value_0::jsonb AND m0.submission_id = c.submission_id OFFSET 0)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m1 WHERE m1.key = @filter_key_1 AND m1.value = ANY(@filter_value_1::text[]::jsonb[]) AND m1.submission_id = c.submission_id OFFSET 0)
ORDER BY c.submission_id DESC, c.chunk_index DESC
LIMIT @limit)
UNION ALL
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_1::int
  AND (c.submission_id, c.chunk_index) < (@after_submission::bigint, @after_chunk::int)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m0 WHERE m0.key = @filter_key_0 AND m0.value = @filter_value_0::jsonb AND m0.submission_id = c.submission_id OFFSET 0)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m1 WHERE m1.key = @filter_key_1 AND m1.value = ANY(@filter_value_1::text[]::jsonb[]) AND m1.submission_id = c.submission_id OFFSET 0)
ORDER BY c.submission_id DESC, c.chunk_index DESC
LIMIT @limit)
UNION ALL
(SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard = @shard_2::int
  AND (c.submission_id, c.chunk_index) < (@after_submission::bigint, @after_chunk::int)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m0 WHERE m0.key = @filter_key_0 AND m0.value = @filter_value_0::jsonb AND m0.submission_id = c.submission_id OFFSET 0)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m1 WHERE m1.key = @filter_key_1 AND m1.value = ANY(@filter_value_1::text[]::jsonb[]) AND m1.submission_id = c.submission_id OFFSET 0)
ORDER BY c.submission_id DESC, c.chunk_index DESC
LIMIT @limit)
) c
ORDER BY c.submission_id DESC, c.chunk_index DESC
LIMIT @limit
-- @filter_key_0 = mode
-- @filter_key_1 = @tenant
-- @filter_value_0 = "preview"
-- @filter_value_1 = ["acme" "globex"]
-- @shard_0 = 0
-- @shard_1 = 7
-- @shard_2 = 63
