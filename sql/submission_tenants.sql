-- The tenant of each of some submissions, in any state; an unknown id has no row. A
-- submission's tenant never changes, so callers may cache the answer.
SELECT id, tenant FROM opsq.submission_status WHERE id = ANY(@ids::bigint[])
