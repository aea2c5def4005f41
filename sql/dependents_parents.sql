-- The parents that have children to act on when they finish or were retried: those of
-- the children waiting on them (in progress), and the parents whose retry marked children
-- to re-arm. What each instance keeps in memory (submissions.Dependents), so that a
-- submission that finishes costs a statement only when it has such children; reloaded at
-- start, after notifications may have been missed, and at each re-check while not empty.
SELECT DISTINCT p.parent
FROM opsq.submission_after a
JOIN opsq.submission_parents p ON p.child = a.id
WHERE a.waiting
  AND (EXISTS (SELECT FROM opsq.submissions s WHERE s.id = a.id) OR a.cancelled_by IS NOT NULL)
