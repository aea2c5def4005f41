-- The waiting children that may act now, at most @limit: the children of @parents (parents
-- that just finished), the submissions @children, and, with @sweep, every waiting child (the
-- periodic re-check that recovers a finish whose arming was lost). A child is in progress
-- and waiting (submission_after.waiting). It starts when no parent is in progress (policy
-- finished) or every parent completed (completed): blocked_by NULL. With policy completed,
-- a parent that failed or was cancelled cancels it: blocked_by names the first such parent
-- in its after, blocked_state its state. A parent deleted by retention (it had finished)
-- counts as completed. Children that may not act yet are not returned.
-- Citus: has a Citus form in layout.go (dependents_due_citus.sql): Citus does not join the coordinator's submission_after and submission_parents to the distributed submissions here.
WITH c AS (
    SELECT p.child AS id FROM opsq.submission_parents p WHERE p.parent = ANY(@parents::bigint[])
    UNION
    SELECT unnest(@children::bigint[])
    UNION
    SELECT a.id FROM opsq.submission_after a WHERE a.waiting AND @sweep::boolean
)
SELECT a.id, b.parent AS blocked_by, b.state AS blocked_state
FROM c
JOIN opsq.submission_after a ON a.id = c.id AND a.waiting
JOIN opsq.submissions s ON s.id = a.id
LEFT JOIN LATERAL (
    SELECT p.parent, ps.state
    FROM opsq.submission_parents p
    JOIN opsq.submission_status ps ON ps.id = p.parent
    WHERE p.child = a.id AND a.policy = 'completed' AND ps.state IN ('failed', 'cancelled')
    ORDER BY p.position
    LIMIT 1
) b ON true
WHERE b.parent IS NOT NULL OR NOT EXISTS (
    SELECT FROM opsq.submission_parents p
    JOIN opsq.submission_status ps ON ps.id = p.parent
    WHERE p.child = a.id AND ps.state = 'in_progress')
ORDER BY a.id
LIMIT @limit
