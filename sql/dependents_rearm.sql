-- The children to re-arm: cancelled by a parent (cancelled_by) whose retry marked them
-- (dependents_rearm_mark.sql: waiting again, still cancelled), those of @parents or, with
-- @sweep, all of them (the periodic re-check that recovers a retry whose re-arm was lost);
-- at most @limit.
-- Citus: the coordinator's own tables (submission_after, submission_parents); joined to distributed ones (U) by Citus's local-distributed join; not yet run there.
SELECT a.id, a.cancelled_by
FROM opsq.submission_after a
JOIN opsq.submissions_cancelled x ON x.id = a.id
WHERE a.waiting AND a.cancelled_by IS NOT NULL
  AND (a.cancelled_by = ANY(@parents::bigint[]) OR @sweep::boolean)
ORDER BY a.id
LIMIT @limit
