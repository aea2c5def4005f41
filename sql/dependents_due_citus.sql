-- On Citus, dependents_due.sql in two steps: Citus does not join the coordinator's
-- submission_after and submission_parents to the distributed submissions (it returned no
-- row where one PostgreSQL returns the child). The waiting children selected as there,
-- with their policy and parents in order, read on the coordinator as arrays (one element
-- per child and parent); then the states of those children and parents read by id, and
-- the same decision as there made on the coordinator. Same rows back.
-- Citus: coordinator-local, then a multi-shard read by id (U) whose rows the coordinator joins.
WITH c AS (
    SELECT p.child AS id FROM opsq.submission_parents p WHERE p.parent = ANY(@parents::bigint[])
    UNION
    SELECT unnest(@children::bigint[])
    UNION
    SELECT a.id FROM opsq.submission_after a WHERE a.waiting AND @sweep::boolean
)
SELECT coalesce(array_agg(a.id ORDER BY a.id, p.position), '{}') AS children,
       coalesce(array_agg(a.policy ORDER BY a.id, p.position), '{}') AS policies,
       coalesce(array_agg(p.parent ORDER BY a.id, p.position), '{}') AS parents,
       coalesce(array_agg(p.position ORDER BY a.id, p.position), '{}') AS positions
FROM c
JOIN opsq.submission_after a ON a.id = c.id AND a.waiting
LEFT JOIN opsq.submission_parents p ON p.child = a.id
-- next statement
WITH st AS (
    SELECT s.id, s.state FROM opsq.submission_status s
    WHERE s.id = ANY(@children::bigint[] || @parents::bigint[])
), cp AS (
    SELECT * FROM unnest(@children::bigint[], @policies::text[], @parents::bigint[], @positions::int[])
        AS cp(child, policy, parent, position)
)
SELECT x.child AS id, b.parent AS blocked_by, b.state AS blocked_state
FROM (SELECT DISTINCT cp.child, cp.policy FROM cp) x
JOIN st cs ON cs.id = x.child AND cs.state = 'in_progress'
LEFT JOIN LATERAL (
    SELECT cp.parent, ps.state
    FROM cp JOIN st ps ON ps.id = cp.parent
    WHERE cp.child = x.child AND x.policy = 'completed' AND ps.state IN ('failed', 'cancelled')
    ORDER BY cp.position
    LIMIT 1
) b ON true
WHERE b.parent IS NOT NULL OR NOT EXISTS (
    SELECT FROM cp JOIN st ps ON ps.id = cp.parent
    WHERE cp.child = x.child AND ps.state = 'in_progress')
ORDER BY x.child
LIMIT @limit::int
