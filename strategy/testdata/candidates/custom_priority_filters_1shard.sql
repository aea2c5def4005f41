SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, -s.priority AS sort_priority, c.ctid
FROM opsq.submissions s
CROSS JOIN LATERAL (
    SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, c.ctid
    FROM opsq.chunks c
    WHERE c.submission_id = s.id
      AND c.shard IN (@shard_0::int)
      AND c.chunk_index > CASE WHEN s.id = @after_submission::bigint THEN @after_chunk::int ELSE -1 END
    ORDER BY c.chunk_index
    LIMIT @limit
) c
WHERE (-s.priority, s.id) >= (@after_priority::bigint, @after_submission::bigint)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m0 WHERE m0.key = @filter_key_0 AND m0.value = @filter_value_0::jsonb AND m0.submission_id = s.id OFFSET 0)
  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m1 WHERE m1.key = @filter_key_1 AND m1.value = ANY(@filter_value_1::text[]::jsonb[]) AND m1.submission_id = s.id OFFSET 0)
ORDER BY -s.priority, s.id
LIMIT @limit
-- @filter_key_0 = mode
-- @filter_key_1 = @tenant
-- @filter_value_0 = "preview"
-- @filter_value_1 = ["acme" "globex"]
-- @shard_0 = 5
