-- Whether opsq's tables are laid out by Citus (migration 00017): the citus extension is
-- there and chunks is one table, not the LIST-partitioned one of one PostgreSQL. Read
-- once at an instance's start (DetectLayout).
-- Citus: catalogs of the coordinator (there opsq.chunks is a plain table, relkind r).
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND (SELECT relkind FROM pg_class WHERE oid = 'opsq.chunks'::regclass) = 'r'
