-- The cluster keys that still verify (DESIGN.md §8): the newest, and each older key until
-- @overlap_us microseconds (queuer.KeyOverlap) after the next newer key was created. left_us
-- is how long the key has left, by the server's clock (null for the newest, which stays
-- until a newer one comes), so that an instance's own clock does not matter.
SELECT id, secret,
       (extract(epoch FROM next_created - now()) * 1000000)::bigint + @overlap_us::bigint AS left_us
FROM (SELECT id, secret, lead(created_at) OVER (ORDER BY id) AS next_created
      FROM opsq.cluster_keys) k
WHERE next_created IS NULL
   OR (extract(epoch FROM next_created - now()) * 1000000)::bigint + @overlap_us::bigint > 0
ORDER BY id
