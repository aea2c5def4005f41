-- Candidates for the random strategy: the instance's shards in random_order, from a cut
-- (the "deck" is cut at a random offset; the caller wraps around with a second range).
-- A Merge Append of one index scan per shard, read lazily.
SELECT submission_id, chunk_index, shard, retries, input, random_order
FROM opsq.chunks
WHERE shard = ANY(@shards::int[])
  AND (random_order, submission_id, chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND random_order < @before_order::int
ORDER BY random_order, submission_id, chunk_index
LIMIT @limit
