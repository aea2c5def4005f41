INSERT INTO opsq.strategic_metadata (key, value, submission_id)
SELECT kv.key, kv.value, @submission_id
FROM jsonb_each(@strategic_metadata::jsonb) AS kv
