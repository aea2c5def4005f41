-- Replaces an instance's summary of its top consumers and of its top values' rates (JSON
-- arrays, bounded by the writer) and deletes the summaries of instances that wrote
-- nothing for an hour, so the table holds about one row per live instance.
-- Citus: the coordinator's own tables.
WITH gone AS (
    DELETE FROM opsq.consumer_activity
     WHERE written_at < now() - interval '1 hour' AND instance <> @instance
)
INSERT INTO opsq.consumer_activity (instance, consumers, value_rates, written_at)
VALUES (@instance, @consumers::jsonb, @value_rates::jsonb, now())
ON CONFLICT (instance) DO UPDATE
   SET consumers = excluded.consumers, value_rates = excluded.value_rates, written_at = excluded.written_at
