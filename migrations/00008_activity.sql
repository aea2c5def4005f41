-- What the dashboard shows of the work being done (DESIGN.md §9): completions and failures
-- per minute over the last 24 h, and who is working. Both are written by each instance
-- from what it counts in memory, on a loop of its own (queuer/admin/activity.go), never by
-- a completion, a fail or the claims loop: the hot path and the renewals pay nothing.
--
-- - activity_minutes is a ring of 1 440 slots, one per minute of a day
--   (slot = minutes since the epoch mod 1 440): a slot holds the counts of the minute it
--   names; the first write of a newer minute into a slot starts it again from zero. So
--   the table never holds more than 1 440 rows and needs no delete. Each instance adds
--   what it counted since its last write (INSERT … ON CONFLICT … DO UPDATE SET
--   completed = completed + excluded.completed), about every 10 s and only when it
--   counted something. failed counts failed attempts, expired leases included.
-- - consumer_activity holds, per instance, its top consumers as a JSON array (at most 50
--   entries of a name ≤ 256 bytes, its chunks in flight, its oldest lease and when it was
--   last seen), rewritten in place about every 10 s; the rows of instances gone for an
--   hour are deleted by the next write of any instance.

-- +goose Up
CREATE TABLE opsq.activity_minutes (
    slot      int PRIMARY KEY CHECK (slot >= 0 AND slot < 1440),
    minute    timestamptz NOT NULL,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0
);

CREATE TABLE opsq.consumer_activity (
    instance   text PRIMARY KEY,
    consumers  jsonb NOT NULL DEFAULT '[]',
    written_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE opsq.consumer_activity;
DROP TABLE opsq.activity_minutes;
