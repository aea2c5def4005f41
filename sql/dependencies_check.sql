-- A new child's parents, as its submit checks them (DESIGN.md §3 "Dependencies"): for each
-- id of @parents, in order, its state when it is a submission of @tenant, NULL otherwise
-- (unknown, deleted by retention, or another tenant's: the same answer, so that a tenant
-- learns nothing of another's ids). A primary-key probe of the four submission tables each.
-- Citus: the coordinator's own tables (submission_after, submission_parents); joined to distributed ones (U) by Citus's local-distributed join; not yet run there.
SELECT (p.position - 1)::int AS position, s.state
FROM unnest(@parents::bigint[]) WITH ORDINALITY AS p(id, position)
LEFT JOIN opsq.submission_status s ON s.id = p.id AND s.tenant = @tenant
ORDER BY p.position
