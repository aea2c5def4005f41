-- The candidates of a custom_priority leaf: the in-progress submissions in priority order
-- (the negated priority, then the id), each joined to its own chunks' ordered scan on the
-- instance's shards. /*shards*/ as in candidates_random.sql; /*filters*/ here filters the
-- submissions (on s.id). On one PostgreSQL too the shards stay an IN list here: each
-- submission's chunks are read by the primary key (submission_id, chunk_index, shard) in
-- chunk order, the other shards' rows filtered out.
-- Citus: refused: its lateral join of submissions (U) to chunks (S) is a join across the groups; custom_priority needs the priority in the chunk rows there (docs/citus.md).
SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, -s.priority AS sort_priority, c.ctid
FROM opsq.submissions s
CROSS JOIN LATERAL (
    SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, c.ctid
    FROM opsq.chunks c
    WHERE c.submission_id = s.id
      AND c.shard IN (/*shards*/)
      AND c.chunk_index > CASE WHEN s.id = @after_submission::bigint THEN @after_chunk::int ELSE -1 END
    ORDER BY c.chunk_index
    LIMIT @limit
) c
WHERE (-s.priority, s.id) >= (@after_priority::bigint, @after_submission::bigint)/*filters*/
ORDER BY -s.priority, s.id
LIMIT @limit
