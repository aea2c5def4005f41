-- On Citus, dependent_start.sql in two steps in the caller's transaction: Citus does not
-- read the distributed submissions from the RETURNING of the coordinator's
-- submission_after. The child waits no more (no row: it was not waiting); then its
-- chunks_total (no row: it is no longer in progress). Same result as there.
-- Citus: coordinator-local, then router (U, by @id).
UPDATE opsq.submission_after a SET waiting = false
WHERE a.id = @id::bigint AND a.waiting
RETURNING a.id
-- next statement
SELECT s.chunks_total FROM opsq.submissions s WHERE s.id = @id::bigint
