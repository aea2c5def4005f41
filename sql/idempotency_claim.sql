-- Claim a tenant's idempotency key for a new submission. No row back means another
-- submission of the tenant holds it (this statement waits for a concurrent holder to
-- commit or roll back). Another tenant's key of the same text is another key.
-- Citus: the coordinator's own tables.
INSERT INTO opsq.idempotency_keys (tenant, key, submission_id)
VALUES (@tenant, @key, @submission_id)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING submission_id
