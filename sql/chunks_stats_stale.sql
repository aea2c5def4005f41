-- Whether the planner's row count of opsq.chunks (pg_class.reltuples) is under half of
-- its live rows as the cumulative statistics count them (n_live_tup), or of @ingested
-- (the rows a commit just added, which those statistics may not count yet: a backend
-- sends its counts a second or more after its commit), with at least @min_rows of them:
-- its plans are then made for a table far smaller than it is. (Typically
-- autovacuum vacuumed it while a large ingest's COPY was still open: it counted none of
-- the rows not yet committed.) One table on one PostgreSQL since migration 00026; on a
-- Citus coordinator, where opsq.chunks holds no rows of its own, always false with
-- @ingested 0 (the caller does not ask with more there).
-- Citus: catalogs of the coordinator, where opsq.chunks holds no rows: always false with @ingested 0, not run with more.
SELECT EXISTS (
    SELECT FROM pg_class c
    JOIN pg_stat_user_tables s ON s.relid = c.oid
    WHERE c.oid = 'opsq.chunks'::regclass
      AND greatest(s.n_live_tup, @ingested::bigint) >= @min_rows::bigint
      AND c.reltuples < greatest(s.n_live_tup, @ingested::bigint) / 2
)
