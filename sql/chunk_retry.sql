-- Count one failed attempt of a chunk, if the attempt is the one the token names (its
-- retries count) and attempts remain. With @claimant set (the owner releasing an expired
-- lease), it also requires the claim the reservation was made under (fencing). One row
-- back: fence_held (false: the fence refused, nothing was written) and retries (the new
-- count; NULL when nothing was counted: the chunk is gone, this attempt was counted
-- already, or no attempts remain).
WITH fence AS (
    SELECT @claimant::text IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = @shard AND sc.claimant = @claimant::text AND sc.generation = @generation::bigint) AS held
), retried AS (
    UPDATE opsq.chunks c
    SET retries = c.retries + 1
    FROM opsq.submissions s
    WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
      AND c.retries = @retries
      AND s.id = c.submission_id
      AND c.retries < s.max_retries
      AND (SELECT held FROM fence)
    RETURNING c.retries
)
SELECT f.held AS fence_held, r.retries
FROM fence f LEFT JOIN retried r ON true
