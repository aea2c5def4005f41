-- Replaces an instance's summary of its top consumers (a JSON array, bounded by the
-- writer) and deletes the summaries of instances that wrote nothing for an hour, so the
-- table holds about one row per live instance.
WITH gone AS (
    DELETE FROM opsq.consumer_activity
     WHERE written_at < now() - interval '1 hour' AND instance <> @instance
)
INSERT INTO opsq.consumer_activity (instance, consumers, written_at)
VALUES (@instance, @consumers::jsonb, now())
ON CONFLICT (instance) DO UPDATE SET consumers = excluded.consumers, written_at = excluded.written_at
