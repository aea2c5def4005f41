-- Claim an idempotency key for a new submission. No row back means another submission
-- holds it (this statement waits for a concurrent holder to commit or roll back).
INSERT INTO opsq.idempotency_keys (key, submission_id)
VALUES (@key, @submission_id)
ON CONFLICT (key) DO NOTHING
RETURNING submission_id
