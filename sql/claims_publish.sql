-- Publish a non-zero in-flight count for a shard before its first reservation since a
-- renewal published 0, so that no other instance takes the shard at its soft expiry while
-- that reservation lives (DESIGN.md §4, two-phase expiry). Fenced like a renewal: nothing
-- is written unless @instance still holds the shard under @generation. A count already
-- higher is kept.
UPDATE opsq.shard_claims
SET inflight = GREATEST(inflight, @inflight::int)
WHERE shard = @shard
  AND claimant = @instance
  AND generation = @generation
  AND NOT disabled
RETURNING shard
