-- A parent of a waiting child (policy completed) failed or was cancelled: the child waits no
-- more, and records that parent and the failure its status shows; its caller, holding its
-- lock, cancels it in the same transaction. No row when it was not waiting (another
-- instance started or cancelled it).
-- Citus: the coordinator's own tables.
UPDATE opsq.submission_after SET waiting = false, cancelled_by = @parent, failure = @failure
WHERE id = @id AND waiting
RETURNING id
