-- A submission without chunks is complete the moment it exists. INSERT … SELECT as in
-- submission_insert.sql.
-- Citus: INSERT … SELECT from the coordinator's settings: the row is made there and routed
-- (U, by @id).
INSERT INTO opsq.submissions_completed
    (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
     prefix, created_at, finished_at, tenant)
SELECT @id::bigint, 0, 0, @priority::bigint, coalesce(@max_retries::int, d.value::int),
       @metadata::text, @strategic_metadata::jsonb, @prefix::text, now(), now(), @tenant::text
FROM opsq.settings d
WHERE d.key = 'default_max_retries'
