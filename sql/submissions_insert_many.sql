-- The rows of many small submissions at once (queuer.SubmitMany): for each, what
-- submission_insert.sql writes for one, without object storage.
-- Citus: INSERT … SELECT: the rows are made on the coordinator and each routed by id (U).
INSERT INTO opsq.submissions
    (id, chunks_total, priority, max_retries, metadata, strategic_metadata, tenant)
SELECT s.id, s.chunks_total, s.priority,
       coalesce(s.max_retries,
                (SELECT value::int FROM opsq.settings WHERE key = 'default_max_retries')),
       s.metadata, s.strategic_metadata, s.tenant
FROM unnest(@ids::bigint[], @chunks_total::int[], @priority::bigint[], @max_retries::int[],
            @metadata::text[], @strategic_metadata::jsonb[], @tenants::text[])
     AS s(id, chunks_total, priority, max_retries, metadata, strategic_metadata, tenant)
