-- On Citus, chunks_promote.sql's share lock on the row of a submission whose chunks are
-- due, skipped when it is paused or locked (a pause in progress), as there.
-- Citus: router (U, by @id).
SELECT id FROM opsq.submissions WHERE id = @id::bigint AND NOT paused FOR SHARE SKIP LOCKED
