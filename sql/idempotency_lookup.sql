-- Citus: the coordinator's own tables.
SELECT submission_id FROM opsq.idempotency_keys WHERE tenant = @tenant AND key = @key
