-- The cluster keys that still verify (queuer/internal/tokens/keyring.go): the newest, and each older key
-- until @overlap_us microseconds (queuer.KeyOverlap) after the next newer key was created.
-- By the server's clock, so that an instance's own does not matter: age_us is how old the
-- key is, left_us how long it has left (null for the newest, which stays until a newer one
-- comes).
-- Citus: the coordinator's own tables.
SELECT id, secret, age_us, left_us
FROM (SELECT id, secret,
             (extract(epoch FROM now() - created_at) * 1000000)::bigint AS age_us,
             (extract(epoch FROM lead(created_at) OVER (ORDER BY id) - now()) * 1000000)::bigint
                 + @overlap_us::bigint AS left_us
      FROM opsq.cluster_keys) k
WHERE left_us IS NULL OR left_us > 0
ORDER BY id
