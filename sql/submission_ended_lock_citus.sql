-- On Citus, submission_ended_lock.sql as two router statements (the CTEs' UNION is not
-- routed), sent in one round trip. Same contract as there.
-- Citus: router (U, by @id), each.
SELECT 'submission cancelled'::text AS error FROM opsq.submissions_cancelled
WHERE id = @id::bigint AND NOT @failed::boolean
FOR UPDATE
-- next statement
SELECT error FROM opsq.submissions_failed
WHERE id = @id::bigint AND @failed::boolean
FOR UPDATE
