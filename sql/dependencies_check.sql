-- A new child's parents, as its submit checks them (DESIGN.md §3 "Dependencies"): for each
-- id of @parents, in order, its state when it is a submission of @tenant, NULL otherwise
-- (unknown, deleted by retention, or another tenant's: the same answer, so that a tenant
-- learns nothing of another's ids). A primary-key probe of the four submission tables each.
-- Citus: no coordinator table: the ids of @parents (a function's rows, sent as an intermediate result) joined to the distributed submission_status (U, the view over the four submission tables): a multi-shard read, each shard probing its own ids; run on a coordinator and 2 workers by every submit `after` parents in the dependency tests of the Citus lists (TestSubmitAfter, TestDependentStartsPromptly, TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt), which check its answers as far as they go.
SELECT (p.position - 1)::int AS position, s.state
FROM unnest(@parents::bigint[]) WITH ORDINALITY AS p(id, position)
LEFT JOIN opsq.submission_status s ON s.id = p.id AND s.tenant = @tenant
ORDER BY p.position
