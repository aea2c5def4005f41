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
ORDER BY -s.priority, s.id
LIMIT @limit
-- @shard_0 = 5
