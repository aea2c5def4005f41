-- Whether any in-progress submission has key = value: a select_only whose value nobody in
-- progress has is skipped, rather than scanning the backlog for it. Only submissions from
-- the oldest in progress on are looked at (finished ones stay in strategic_metadata until
-- retention).
SELECT EXISTS (
    SELECT 1
    FROM opsq.strategic_metadata m
    JOIN opsq.submissions s ON s.id = m.submission_id
    WHERE m.key = @key AND m.value = @value::jsonb
      AND m.submission_id >= (SELECT coalesce(min(id), 0) FROM opsq.submissions)
)
