-- Each value's recent rate on the dashboard (DESIGN.md §9, docs/rates.md): each instance
-- counts in memory the chunks it hands out per value of the keys the strategies limit
-- (queuer/valuerates: rate_limit's and weighted_fair's keys, and the throttles' keys, over
-- the last minute, a bounded table) and writes its top 20 with its summary of who is
-- working, in the same row and the same upsert, about every 10 s. Nothing is written per
-- chunk; the dashboard adds up the fresh rows of the instances.
--
-- value_rates is a JSON array of at most 20 {"k": key, "v": value's JSON text,
-- "n": chunks in the window, "r": chunks per second}.

-- +goose Up
ALTER TABLE opsq.consumer_activity ADD COLUMN value_rates jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE opsq.consumer_activity DROP COLUMN value_rates;
