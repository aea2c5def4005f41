-- Lock a tenant's quota row for the rest of the submit's transaction, so that two
-- submissions of the tenant are checked one after the other (each then counts with a
-- snapshot that sees the other). No row: the tenant has no quota, nothing is locked.
-- Citus: the coordinator's own tables.
SELECT max_pending_chunks, max_in_progress
FROM opsq.tenants
WHERE name = @tenant
FOR UPDATE
