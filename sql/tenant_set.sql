-- Set a tenant's quotas (NULL: no limit), making its row if it has none.
INSERT INTO opsq.tenants (name, max_pending_chunks, max_in_progress)
VALUES (@name, @max_pending_chunks, @max_in_progress)
ON CONFLICT (name) DO UPDATE
SET max_pending_chunks = excluded.max_pending_chunks, max_in_progress = excluded.max_in_progress
RETURNING name, max_pending_chunks, max_in_progress
