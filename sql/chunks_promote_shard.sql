-- On Citus, chunks_promote.sql's move for the chunks of one opsq shard: those still
-- waiting and due move to opsq.chunks. The DELETE is the claim: of two instances moving
-- the same chunks at once, the second deletes none and so inserts none. Returns the shard
-- of each chunk moved.
-- Citus: the DELETE is routed to the node of @shard; the INSERT of its rows goes through
-- the coordinator (a CTE that inserts is not routed), to the same node.
WITH moved AS (
    DELETE FROM opsq.chunks_waiting w
    WHERE w.shard = @shard::int AND w.ready_at <= now()
      AND (w.submission_id, w.chunk_index) IN (
          SELECT unnest(@submission_ids::bigint[]), unnest(@chunk_indexes::int[]))
    RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
)
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base FROM moved
RETURNING shard
