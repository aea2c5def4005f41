-- What a child's status adds (GET /v1/submissions/{id}): its policy, its parents in the
-- order of its after, those of them in progress (waiting_on; a parent deleted by retention
-- had finished), and the failure a parent's end gave it. No row for a submission that is
-- no child.
-- Citus: the coordinator's own tables (submission_after, submission_parents) joined to distributed ones (U): Citus plans it as a local-distributed join, the coordinator's rows sent as an intermediate result; run on a coordinator and 2 workers by the dependency tests of the Citus lists (TestSubmitAfter, TestDependentStartsPromptly, TestDependencyLostArmingIsRecovered, TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt), which check its results as far as they go.
SELECT a.policy, a.failure,
       array_agg(p.parent ORDER BY p.position) AS after,
       coalesce(array_agg(p.parent ORDER BY p.position) FILTER (WHERE ps.state = 'in_progress'), '{}') AS waiting_on
FROM opsq.submission_after a
JOIN opsq.submission_parents p ON p.child = a.id
LEFT JOIN opsq.submission_status ps ON ps.id = p.parent
WHERE a.id = @id
GROUP BY a.id, a.policy, a.failure
