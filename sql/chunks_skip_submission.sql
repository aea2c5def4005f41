-- The chunks of a submission that was just cancelled: every pending one, reservable or
-- waiting, becomes a skipped chunk of chunks_failed, keeping its input for a retry of the
-- unfinished ones. One primary-key range per shard.
-- Citus: CTEs run as subplans: deletes on every shard (S, by submission, not by shard),
-- whose rows pass through the coordinator into a router insert (U, by @submission_id).
WITH ready AS (
    DELETE FROM opsq.chunks WHERE submission_id = @submission_id
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
), waiting AS (
    DELETE FROM opsq.chunks_waiting WHERE submission_id = @submission_id
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
)
INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input, attempt_base FROM ready
UNION ALL
SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input, attempt_base FROM waiting
