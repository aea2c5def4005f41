-- Write the shard and random order of failed chunks that have none (chunks_failed_unplaced.sql).
-- Citus: router (U, by @submission_id).
UPDATE opsq.chunks_failed f
SET shard = p.shard, random_order = p.random_order
FROM unnest(@chunk_indexes::int[], @shards::int[], @random_orders::int[]) AS p(chunk_index, shard, random_order)
WHERE f.submission_id = @submission_id AND f.chunk_index = p.chunk_index
