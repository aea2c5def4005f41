-- The chunk partitions of @shards whose planner row count (pg_class.reltuples) is under
-- half of their live rows as the cumulative statistics count them (n_live_tup), with at
-- least @min_rows live: those whose plans are made for a table far smaller than it is.
-- (Typically a partition autovacuum vacuumed while a large ingest's COPY was still open:
-- it counted none of the rows not yet committed, and set reltuples to 0.) Each row names
-- the partition as ANALYZE takes it, and its shard (migration 00001 names them chunks_<shard>).
-- Citus: catalogs of the coordinator; the chunks have no partitions there, so it finds
-- none.
SELECT p.shard, c.oid::regclass::text AS partition
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL (SELECT substring(c.relname FROM '^chunks_([0-9]+)$')::int AS shard) p
JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE i.inhparent = 'opsq.chunks'::regclass
  AND p.shard = ANY(@shards::int[])
  AND s.n_live_tup >= @min_rows::bigint
  AND c.reltuples < s.n_live_tup / 2
ORDER BY p.shard
