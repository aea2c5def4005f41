-- On Citus, dependent_retry.sql in three steps, in the retry's transaction: Citus does not
-- join the coordinator's submission_after and submission_parents to the distributed
-- submission_status in one statement. The child's parents (in their order); their states,
-- read by id; then the child's row, waiting computed from those states as there. Same row
-- back; no row for a submission that is no child.
-- Citus: coordinator-local, then multi-shard read by id (U), then coordinator-local.
SELECT coalesce(array_agg(p.parent ORDER BY p.position), '{}') AS parents
FROM opsq.submission_parents p WHERE p.child = @id::bigint
-- next statement
SELECT coalesce(array_agg(s.state::text), '{}') AS states
FROM opsq.submission_status s WHERE s.id = ANY(@parents::bigint[])
-- next statement
UPDATE opsq.submission_after a
SET waiting = EXISTS (
        SELECT FROM unnest(@states::text[]) AS ps(state)
        WHERE ps.state = 'in_progress' OR a.policy = 'completed' AND ps.state IN ('failed', 'cancelled')),
    cancelled_by = NULL, failure = NULL
WHERE a.id = @id::bigint
RETURNING a.waiting, @parents::bigint[] AS parents
