-- Adds what an instance counted since its last write to the current minute's slot of the
-- ring opsq.activity_minutes (migrations/00008_activity.sql): one upsert, about every 10 s
-- per instance, never per chunk. A slot still holding an older minute (a day ago, or
-- earlier) starts again from zero. Time is the database's.
-- Citus: the coordinator's own tables.
INSERT INTO opsq.activity_minutes AS a (slot, minute, completed, failed)
SELECT (floor(extract(epoch FROM m) / 60)::bigint % 1440)::int, m, @completed::bigint, @failed::bigint
  FROM (SELECT date_trunc('minute', now()) AS m) AS now_minute
ON CONFLICT (slot) DO UPDATE
   SET completed = CASE WHEN a.minute = excluded.minute THEN a.completed + excluded.completed ELSE excluded.completed END,
       failed    = CASE WHEN a.minute = excluded.minute THEN a.failed + excluded.failed ELSE excluded.failed END,
       minute    = excluded.minute
