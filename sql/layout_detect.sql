-- Whether opsq's tables are laid out by Citus (migration 00017): the citus extension is
-- there and chunks is one table. (On one PostgreSQL chunks is one table too since
-- migration 00026, which flattens it only where the citus extension is absent.) Read
-- once at an instance's start (DetectLayout).
-- Citus: catalogs of the coordinator (there opsq.chunks is a plain table, relkind r).
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND (SELECT relkind FROM pg_class WHERE oid = 'opsq.chunks'::regclass) = 'r'
