-- The planner's statistics of opsq.chunks anew (chunks_stats_stale.sql found them far
-- behind), unless another session holds a lock that conflicts: autovacuum, or another
-- instance, is at it already.
-- Citus: not run there (chunks_stats_stale.sql is false on a coordinator).
ANALYZE (SKIP_LOCKED) opsq.chunks
