-- The candidates of an oldest_first leaf: a Merge Append of one ordered index scan per
-- shard of the instance (chunks_shard_submission on one PostgreSQL, a primary-key scan per
-- Citus shard on Citus), oldest submission first. /*shards*/ and /*filters*/ as in
-- candidates_random.sql.
-- Citus: multi-shard read (S, the shards of the IN list), ORDER BY and LIMIT pushed down to each and merged on the coordinator; the IN form, not candidates_shards.sql's UNION ALL.
SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority, c.ctid
FROM opsq.chunks c
WHERE c.shard IN (/*shards*/)
  AND (c.submission_id, c.chunk_index) > (@after_submission::bigint, @after_chunk::int)/*filters*/
ORDER BY c.submission_id, c.chunk_index
LIMIT @limit
