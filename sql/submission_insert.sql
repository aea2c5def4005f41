-- The row of a new submission in progress. INSERT … SELECT from the settings, not a VALUES
-- list with a subquery, which Citus refuses ("subqueries are not supported within INSERT
-- queries"): on Citus the row is computed on the coordinator and routed to the node of
-- its id.
-- Citus: INSERT … SELECT from the coordinator's settings: the row is made there and routed
-- (U, by @id).
INSERT INTO opsq.submissions
    (id, chunks_total, priority, max_retries, metadata, strategic_metadata, prefix, created_by_key, tenant)
SELECT @id::bigint, @chunks_total::int, @priority::bigint, coalesce(@max_retries::int, d.value::int),
       @metadata::text, @strategic_metadata::jsonb, @prefix::text, nullif(@created_by_key::bigint, 0), @tenant::text
FROM opsq.settings d
WHERE d.key = 'default_max_retries'
