-- The candidates of a random leaf: a Merge Append of one ordered index scan per shard of
-- the instance (chunks_random_order, which leads with the shard), from a random cut of the
-- 16-bit ring (random_order) onwards. The compiler (strategy.CandidateQuery, through
-- CandidateQuery) puts the shards' arguments where /*shards*/ stands and the strategic
-- metadata filters where /*filters*/ stands; on one PostgreSQL it runs this once per
-- shard, each with c.shard = that shard's argument, and merges them
-- (candidates_shards.sql); on Citus, as it is.
-- Citus: multi-shard read (S, the shards of the IN list), ORDER BY and LIMIT pushed down to each and merged on the coordinator; the IN form, not candidates_shards.sql's UNION ALL.
SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard IN (/*shards*/)
  AND (c.random_order, c.submission_id, c.chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND c.random_order < @before_order::int/*filters*/
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit
