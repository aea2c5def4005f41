-- The instances' summaries of their consumers written in the last @fresh (an interval):
-- older ones are those of instances that stopped, whose reservations are gone with them.
-- now is the database's clock, for the ages.
-- Citus: the coordinator's own tables.
SELECT instance, consumers, written_at, now() AS now
  FROM opsq.consumer_activity
 WHERE written_at > now() - @fresh::interval
 ORDER BY instance
