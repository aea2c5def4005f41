-- The last step for an expired submission, once its chunk rows are gone (its parents and
-- policy, if it is a child, too; the rows naming it a parent stay, its children's after).
-- Citus: CTEs run as subplans: router deletes (U, by @submission_id), a delete from the
-- reference table (every node), then the coordinator's own table.
WITH c AS (DELETE FROM opsq.submissions_completed WHERE id = @submission_id),
     f AS (DELETE FROM opsq.submissions_failed WHERE id = @submission_id),
     x AS (DELETE FROM opsq.submissions_cancelled WHERE id = @submission_id),
     m AS (DELETE FROM opsq.strategic_metadata WHERE submission_id = @submission_id),
     l AS (DELETE FROM opsq.submission_lifecycle WHERE id = @submission_id),
     t AS (DELETE FROM opsq.submission_traces WHERE id = @submission_id),
     a AS (DELETE FROM opsq.submission_after WHERE id = @submission_id),
     p AS (DELETE FROM opsq.submission_parents WHERE child = @submission_id)
DELETE FROM opsq.idempotency_keys WHERE submission_id = @submission_id
