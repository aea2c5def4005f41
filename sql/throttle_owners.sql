-- The instances that may hand out chunks now, but @instance: those holding a claim on a
-- shard that has not reached its hard expiry. A throttle's setter waits for each of them
-- to have the throttle in force (queuer/internal/throttles).
-- Citus: the coordinator's own tables.
SELECT DISTINCT claimant
FROM opsq.shard_claims
WHERE claimant IS NOT NULL AND claimant <> @instance AND hard_expires_at > now()
