-- The candidates of one submission (@only_submission) on the instance's shards, in chunk
-- order: a Merge Append of per-shard index range scans (chunks_shard_submission on one
-- PostgreSQL; select_only scans the few submissions that have its value this way).
-- /*shards*/ and /*filters*/ as in candidates_random.sql.
-- Citus: multi-shard read (S, the shards of the IN list), ORDER BY and LIMIT pushed down to each and merged on the coordinator; the IN form, not candidates_shards.sql's UNION ALL.
SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard IN (/*shards*/)
  AND c.submission_id = @only_submission::bigint
  AND c.chunk_index > @after_chunk::int/*filters*/
ORDER BY c.chunk_index
LIMIT @limit
