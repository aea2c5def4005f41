-- The parents that have children to act on when they finish or were retried: those of
-- the children waiting on them (in progress), and the parents whose retry marked children
-- to re-arm. What each instance keeps in memory (submissions.Dependents), so that a
-- submission that finishes costs a statement only when it has such children; reloaded at
-- start, after notifications may have been missed, and at each re-check while not empty.
-- waiting counts the children in progress waiting on parents (the metric
-- opsq_children_waiting).
-- Citus: the coordinator's own tables (submission_after, submission_parents) joined to distributed ones (U): Citus plans it as a local-distributed join, the coordinator's rows sent as an intermediate result; run on a coordinator and 2 workers by the dependency tests of the Citus lists (TestSubmitAfter, TestDependentStartsPromptly, TestDependencyLostArmingIsRecovered, TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt), which check its results as far as they go.
SELECT coalesce(array_agg(DISTINCT p.parent), '{}') AS parents,
       count(DISTINCT a.id) FILTER (WHERE s.id IS NOT NULL) AS waiting
FROM opsq.submission_after a
JOIN opsq.submission_parents p ON p.child = a.id
LEFT JOIN opsq.submissions s ON s.id = a.id
WHERE a.waiting AND (s.id IS NOT NULL OR a.cancelled_by IS NOT NULL)
