-- The tenant of each of some submissions, in any state; an unknown id has no row. A
-- submission's tenant never changes, so callers may cache the answer.
-- Citus: a read of the shards (U) that hold @ids.
SELECT id, tenant FROM opsq.submission_status WHERE id = ANY(@ids::bigint[])
