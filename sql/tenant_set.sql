-- Set a tenant's quotas (NULL: no limit), making its row if it has none; a quota whose
-- @keep_… is true keeps its value (none for a new row).
-- Citus: the coordinator's own tables.
INSERT INTO opsq.tenants (name, max_pending_chunks, max_in_progress)
VALUES (@name, CASE WHEN @keep_pending::bool THEN NULL ELSE @max_pending_chunks::bigint END,
        CASE WHEN @keep_in_progress::bool THEN NULL ELSE @max_in_progress::int END)
ON CONFLICT (name) DO UPDATE
SET max_pending_chunks = CASE WHEN @keep_pending::bool THEN opsq.tenants.max_pending_chunks ELSE excluded.max_pending_chunks END,
    max_in_progress = CASE WHEN @keep_in_progress::bool THEN opsq.tenants.max_in_progress ELSE excluded.max_in_progress END
RETURNING name, max_pending_chunks, max_in_progress
