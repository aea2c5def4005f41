-- On Citus, chunk_retry.sql as the steps of opsq.chunk_retry_steps (migration 00019),
-- each a statement on one node; the caller sends the NOTIFYs after it. One row back:
-- fence_held, retries (NULL: nothing counted) and waits, as chunk_retry.sql's.
-- Citus: a function of the coordinator; its statements are routed one by one.
SELECT fence_held, retries, waits
FROM opsq.chunk_retry_steps(@shard::int, @submission_id::bigint, @chunk_index::int, @attempt::int,
    @generation::bigint, @claimant::text, @delay_ms::bigint, @error::text, @consumer::text, @token::text)
