-- Whether the planner's row count of opsq.chunks (pg_class.reltuples) is under half of
-- its live rows as the cumulative statistics count them (n_live_tup), with at least
-- @min_rows live: its plans are then made for a table far smaller than it is. (Typically
-- autovacuum vacuumed it while a large ingest's COPY was still open: it counted none of
-- the rows not yet committed.) One table on one PostgreSQL since migration 00026; on a
-- Citus coordinator, where opsq.chunks holds no rows of its own, always false.
-- Citus: catalogs of the coordinator, where opsq.chunks holds no rows: always false.
SELECT EXISTS (
    SELECT FROM pg_class c
    JOIN pg_stat_user_tables s ON s.relid = c.oid
    WHERE c.oid = 'opsq.chunks'::regclass
      AND s.n_live_tup >= @min_rows::bigint
      AND c.reltuples < s.n_live_tup / 2
)
