-- A chunk's attempt, the one a reservation token names (queuer/tokens: the field it has
-- always called its retries), is attempt_base + retries: it only grows, across every path
-- that hands the chunk out again, so that no token of an earlier attempt names a later
-- one (DESIGN.md §8). retries alone is the chunk's count within its attempt budget, and a
-- retry of its submission (chunks_retry_failed.sql) sets it to 0 for a fresh budget: the
-- retry adds the attempts of the budget it ends (retries + 1) to attempt_base instead.
-- Every statement that moves a chunk between these tables carries the column.
-- The default makes the column free to add (no rewrite) and keeps the tokens issued
-- before it valid: for them attempt_base is 0 and their attempt is the retries count they
-- carry.

-- +goose Up
ALTER TABLE opsq.chunks ADD COLUMN attempt_base int NOT NULL DEFAULT 0;
ALTER TABLE opsq.chunks_waiting ADD COLUMN attempt_base int NOT NULL DEFAULT 0;
ALTER TABLE opsq.chunks_failed ADD COLUMN attempt_base int NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE opsq.chunks_failed DROP COLUMN attempt_base;
ALTER TABLE opsq.chunks_waiting DROP COLUMN attempt_base;
ALTER TABLE opsq.chunks DROP COLUMN attempt_base;
