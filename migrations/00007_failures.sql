-- When work goes wrong (issue 19, DESIGN.md §1 and §3): failure policies, retry backoff,
-- not_before, pause, the errors of each failed attempt, and retries of failed or skipped
-- chunks.
--
-- - A submission's lifecycle settings, given once at insert, live in a table of their own
--   (submission_lifecycle), kept for every state until retention, so that the four
--   submission tables and the statements that move a row between them stay as they are
--   but for two counters.
-- - Counters: chunks_failed (attempts spent) and chunks_skipped (never finished because
--   the submission failed or was cancelled) on every submission table. A submission is
--   finished when chunks_done + chunks_failed + chunks_skipped = chunks_total.
-- - Waiting chunks (a retry's backoff, before not_before, paused) are not in opsq.chunks
--   but in opsq.chunks_waiting, with the time they become reservable (ready_at;
--   'infinity' while paused): a reserve never reads past them, because they are not in the
--   table it reads. Each instance moves the chunks that are due back into opsq.chunks (and
--   announces them), a batch at a time.
-- - A failed or skipped chunk keeps its input (and its shard and random order) in
--   opsq.chunks_failed, so that a retry can make it reservable again. Rows failed before
--   this migration have none; a retry of those hands out an empty input (object-storage
--   submissions need none).
-- - chunk_errors keeps the last 5 errors of each chunk (each at most 8 KiB).

-- +goose Up
CREATE TABLE opsq.submission_lifecycle (
    id                 bigint PRIMARY KEY,
    -- on_failure as the producer gave it (JSON), echoed in the status.
    on_failure         jsonb NOT NULL DEFAULT '"fail_submission"',
    -- The submission fails (and skips its other chunks) once more than max_failed of its
    -- chunks have failed; NULL never (on_failure "continue").
    max_failed         int,
    backoff_initial_ms bigint NOT NULL DEFAULT 1000,
    backoff_factor     float8 NOT NULL DEFAULT 2,
    backoff_max_ms     bigint NOT NULL DEFAULT 60000,
    not_before         timestamptz
);

ALTER TABLE opsq.submissions
    ADD COLUMN chunks_failed  int NOT NULL DEFAULT 0,
    ADD COLUMN chunks_skipped int NOT NULL DEFAULT 0,
    ADD COLUMN paused         boolean NOT NULL DEFAULT false;
ALTER TABLE opsq.submissions_completed
    ADD COLUMN chunks_failed  int NOT NULL DEFAULT 0,
    ADD COLUMN chunks_skipped int NOT NULL DEFAULT 0;
ALTER TABLE opsq.submissions_cancelled
    ADD COLUMN chunks_failed  int NOT NULL DEFAULT 0,
    ADD COLUMN chunks_skipped int NOT NULL DEFAULT 0;
-- A failed submission skipped every chunk it had not finished.
ALTER TABLE opsq.submissions_failed
    ADD COLUMN chunks_skipped int NOT NULL DEFAULT 0;
UPDATE opsq.submissions_failed SET chunks_skipped = greatest(chunks_total - chunks_done - chunks_failed, 0);

CREATE TABLE opsq.chunks_waiting (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    shard         int NOT NULL,
    random_order  int NOT NULL,
    retries       int NOT NULL DEFAULT 0,
    input         bytea,
    ready_at      timestamptz NOT NULL,
    PRIMARY KEY (submission_id, chunk_index)
);
-- The promotion of the chunks that are due, oldest first.
CREATE INDEX chunks_waiting_ready_at ON opsq.chunks_waiting (ready_at);

ALTER TABLE opsq.chunks_failed
    ADD COLUMN shard        int,
    ADD COLUMN random_order int,
    ADD COLUMN input        bytea;

CREATE TABLE opsq.chunk_errors (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    -- The chunk's failures in order, 0 for its first, across retries of its submission.
    attempt       int NOT NULL,
    error         text NOT NULL,
    consumer      text NOT NULL DEFAULT '',
    at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (submission_id, chunk_index, attempt)
);

CREATE OR REPLACE VIEW opsq.submission_status AS
    SELECT id, 'in_progress'::text AS state, chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           NULL::timestamptz AS finished_at, NULL::int AS failed_chunk_index, NULL::text AS error,
           chunks_skipped, paused
      FROM opsq.submissions
    UNION ALL
    SELECT id, 'completed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false
      FROM opsq.submissions_completed
    UNION ALL
    SELECT id, 'failed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, failed_chunk_index, error, chunks_skipped, false
      FROM opsq.submissions_failed
    UNION ALL
    SELECT id, 'cancelled', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL, chunks_skipped, false
      FROM opsq.submissions_cancelled;

-- +goose Down
DROP VIEW opsq.submission_status;
CREATE VIEW opsq.submission_status AS
    SELECT id, 'in_progress'::text AS state, chunks_total, chunks_done, 0 AS chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           NULL::timestamptz AS finished_at, NULL::int AS failed_chunk_index, NULL::text AS error
      FROM opsq.submissions
    UNION ALL
    SELECT id, 'completed', chunks_total, chunks_done, 0,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL
      FROM opsq.submissions_completed
    UNION ALL
    SELECT id, 'failed', chunks_total, chunks_done, chunks_failed,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, failed_chunk_index, error
      FROM opsq.submissions_failed
    UNION ALL
    SELECT id, 'cancelled', chunks_total, chunks_done, 0,
           priority, max_retries, metadata, strategic_metadata, prefix, created_at,
           finished_at, NULL, NULL
      FROM opsq.submissions_cancelled;
DROP TABLE opsq.chunk_errors;
ALTER TABLE opsq.chunks_failed DROP COLUMN shard, DROP COLUMN random_order, DROP COLUMN input;
-- Waiting chunks become reservable again: the schema before this one has no other place
-- for a pending chunk.
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input)
SELECT submission_id, chunk_index, shard, random_order, retries, input FROM opsq.chunks_waiting;
DROP TABLE opsq.chunks_waiting;
ALTER TABLE opsq.submissions_failed DROP COLUMN chunks_skipped;
ALTER TABLE opsq.submissions_cancelled DROP COLUMN chunks_failed, DROP COLUMN chunks_skipped;
ALTER TABLE opsq.submissions_completed DROP COLUMN chunks_failed, DROP COLUMN chunks_skipped;
ALTER TABLE opsq.submissions DROP COLUMN chunks_failed, DROP COLUMN chunks_skipped, DROP COLUMN paused;
DROP TABLE opsq.submission_lifecycle;
