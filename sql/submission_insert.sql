INSERT INTO opsq.submissions
    (id, chunks_total, priority, max_retries, metadata, strategic_metadata, prefix, created_by_key, tenant)
VALUES
    (@id, @chunks_total, @priority,
     coalesce(@max_retries::int,
              (SELECT value::int FROM opsq.settings WHERE key = 'default_max_retries')),
     @metadata, @strategic_metadata, @prefix, nullif(@created_by_key::bigint, 0), @tenant)
