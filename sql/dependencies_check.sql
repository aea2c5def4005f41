-- A new child's parents, as its submit checks them (DESIGN.md §3 "Dependencies"): for each
-- id of @parents, in order, its state when it is a submission of @tenant, NULL otherwise
-- (unknown, deleted by retention, or another tenant's: the same answer, so that a tenant
-- learns nothing of another's ids). A primary-key probe of the four submission tables each.
-- Citus: the coordinator's own tables (submission_after, submission_parents) joined to distributed ones (U): Citus plans it as a local-distributed join, the coordinator's rows sent as an intermediate result; run on a coordinator and 2 workers by the dependency tests of the Citus lists (TestSubmitAfter, TestDependentStartsPromptly, TestDependencyLostArmingIsRecovered, TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt), which check its results as far as they go.
SELECT (p.position - 1)::int AS position, s.state
FROM unnest(@parents::bigint[]) WITH ORDINALITY AS p(id, position)
LEFT JOIN opsq.submission_status s ON s.id = p.id AND s.tenant = @tenant
ORDER BY p.position
