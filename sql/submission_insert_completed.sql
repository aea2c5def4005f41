-- A submission without chunks is complete the moment it exists.
INSERT INTO opsq.submissions_completed
    (id, chunks_total, chunks_done, priority, max_retries, metadata, strategic_metadata,
     prefix, created_at, finished_at, tenant)
VALUES
    (@id, 0, 0, @priority,
     coalesce(@max_retries::int,
              (SELECT value::int FROM opsq.settings WHERE key = 'default_max_retries')),
     @metadata, @strategic_metadata, @prefix, now(), now(), @tenant)
