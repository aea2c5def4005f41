-- On Citus, chunk_fail.sql as the steps of opsq.chunk_fail_steps (migration 00020), each a
-- statement on one node (but the skip of a failing submission's other chunks, on every
-- shard that holds them). One row back, as chunk_fail.sql's.
-- Citus: a function of the coordinator; its statements are routed one by one.
SELECT fence_held, submission_id, finished, dropped, sliced, chunks_total
FROM opsq.chunk_fail_steps(@shard::int, @submission_id::bigint, @chunk_index::int, @attempt::int,
    @generation::bigint, @claimant::text, @error::text, @consumer::text, @skip_now::bigint)
