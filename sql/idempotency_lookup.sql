SELECT submission_id FROM opsq.idempotency_keys WHERE key = @key
