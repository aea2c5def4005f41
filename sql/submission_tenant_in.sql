-- Submission @id's tenant when it is one of @tenants, in any state; no row otherwise. The
-- tenant is in the WHERE clause so that an id of another tenant and an unknown id miss the
-- same way, by the same statement (DESIGN.md §8: nothing, not even the time an answer
-- takes, tells a caller that another tenant's submission exists).
-- Citus: router (U, by @id; the view's tables are co-located).
SELECT id, tenant FROM opsq.submission_status WHERE id = @id AND tenant = ANY(@tenants::text[])
