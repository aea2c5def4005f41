-- The instances' top values' rates written in the last @fresh (an interval): older ones
-- are those of instances that stopped.
-- Citus: the coordinator's own tables.
SELECT instance, value_rates
  FROM opsq.consumer_activity
 WHERE written_at > now() - @fresh::interval
 ORDER BY instance
