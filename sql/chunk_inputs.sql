-- The inputs of these chunks (prefer_distinct re-reads the few deferred chunks it hands
-- out, rather than keep the inputs of every deferred row in memory). A chunk that is gone
-- (finished since the scan) has no row.
-- Citus: multi-shard read (S): every shard joined with the keys, not pruned to their
-- shards.
SELECT c.submission_id, c.chunk_index, c.input
FROM unnest(@submission_ids::bigint[], @chunk_indexes::int[], @shards::int[]) AS k(submission_id, chunk_index, shard)
JOIN opsq.chunks c
  ON c.submission_id = k.submission_id AND c.chunk_index = k.chunk_index AND c.shard = k.shard
