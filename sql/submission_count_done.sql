-- On Citus, chunks_complete.sql's "counted" for one submission: @n more chunks done, and
-- whether that finished it.
-- Citus: router (U, by @id).
UPDATE opsq.submissions
SET chunks_done = chunks_done + @n::int
WHERE id = @id::bigint
RETURNING chunks_done + chunks_failed + chunks_skipped = chunks_total
