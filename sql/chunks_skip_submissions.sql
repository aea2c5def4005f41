-- The chunks of many submissions that were just cancelled (submissions.CancelMany): what
-- chunks_skip_submission.sql does for one, in one statement rather than one per
-- submission.
-- Citus: CTEs run as subplans: deletes on every shard (S, by submission, not by shard),
-- whose rows pass through the coordinator into inserts routed by submission (U).
WITH ready AS (
    DELETE FROM opsq.chunks WHERE submission_id = ANY(@submission_ids::bigint[])
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
), waiting AS (
    DELETE FROM opsq.chunks_waiting WHERE submission_id = ANY(@submission_ids::bigint[])
    RETURNING submission_id, chunk_index, shard, random_order, retries, input, attempt_base
)
INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input, attempt_base FROM ready
UNION ALL
SELECT submission_id, chunk_index, retries, 'submission cancelled', true, shard, random_order, input, attempt_base FROM waiting
