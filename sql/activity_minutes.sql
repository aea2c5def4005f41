-- Completions and failed attempts per minute over the last 24 h, oldest first: the slots
-- of the ring whose minute is recent (at most 1 440 rows; minutes nobody counted anything
-- in have no row). now is the database's clock, to place them.
-- Citus: the coordinator's own tables.
SELECT minute, completed, failed, now() AS now
  FROM opsq.activity_minutes
 WHERE minute > now() - interval '24 hours'
 ORDER BY minute
