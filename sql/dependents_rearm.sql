-- The children to re-arm: cancelled by a parent (cancelled_by) whose retry marked them
-- (dependents_rearm_mark.sql: waiting again, still cancelled), those of @parents or, with
-- @sweep, all of them (the periodic re-check that recovers a retry whose re-arm was lost);
-- at most @limit.
-- Citus: the coordinator's own tables (submission_after, submission_parents) joined to distributed ones (U): Citus plans it as a local-distributed join, the coordinator's rows sent as an intermediate result; run on a coordinator and 2 workers by the dependency tests of the Citus lists (TestSubmitAfter, TestDependentStartsPromptly, TestDependencyLostArmingIsRecovered, TestDependencyFailedParentCancelsTheChainAndRetryRearmsIt), which check its results as far as they go.
SELECT a.id, a.cancelled_by
FROM opsq.submission_after a
JOIN opsq.submissions_cancelled x ON x.id = a.id
WHERE a.waiting AND a.cancelled_by IS NOT NULL
  AND (a.cancelled_by = ANY(@parents::bigint[]) OR @sweep::boolean)
ORDER BY a.id
LIMIT @limit
