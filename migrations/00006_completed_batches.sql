-- Completed chunks are stored a batch at a time (issue 10: what PostgreSQL pays per chunk).
-- The completer writes, per submission in one complete batch (up to 1 000 chunks), one row:
-- the chunk indexes and their outputs as two arrays in the same order. A completion then
-- costs its share of one heap row and one index entry instead of a heap row and an index
-- entry of its own: pg_waldump of a burn-down (docs/capacity.md) showed the per-chunk row
-- (about 80 bytes of WAL) and its primary-key entry (about 75, and the page splits) to be
-- two thirds of a completion's 229 bytes; the delete of the chunk row (54) is the rest.
--
-- The view opsq.chunks_completed keeps showing one row per completed chunk, as the table of
-- that name did (results, admin SQL, tests). What it no longer gives is a lookup of one
-- chunk by primary key: the statements that asked "is this chunk completed?" ask instead
-- whether its submission is in progress and the chunk is no longer in opsq.chunks
-- (chunk_state.sql), and results sort a submission's chunks by index (results_stream.sql).

-- +goose Up
CREATE TABLE opsq.completed_batches (
    submission_id bigint NOT NULL,
    -- The smallest chunk index of the row: each chunk is completed once (its row in
    -- opsq.chunks is deleted by the completion that stores it), so it names the row.
    first_index   int NOT NULL,
    chunk_indexes int[] NOT NULL,
    outputs       bytea[] NOT NULL,
    completed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (submission_id, first_index),
    CHECK (cardinality(chunk_indexes) = cardinality(outputs))
);

INSERT INTO opsq.completed_batches (submission_id, first_index, chunk_indexes, outputs, completed_at)
SELECT submission_id, min(chunk_index), array_agg(chunk_index ORDER BY chunk_index),
       array_agg(output ORDER BY chunk_index), max(completed_at)
FROM opsq.chunks_completed
GROUP BY submission_id, chunk_index / 1000;

DROP TABLE opsq.chunks_completed;

CREATE VIEW opsq.chunks_completed AS
    SELECT b.submission_id, c.chunk_index, c.output, b.completed_at
    FROM opsq.completed_batches b, unnest(b.chunk_indexes, b.outputs) AS c(chunk_index, output);

-- +goose Down
CREATE TABLE opsq.chunks_completed_rows (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    output        bytea NOT NULL,
    completed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (submission_id, chunk_index)
);
INSERT INTO opsq.chunks_completed_rows (submission_id, chunk_index, output, completed_at)
SELECT submission_id, chunk_index, output, completed_at FROM opsq.chunks_completed;
DROP VIEW opsq.chunks_completed;
DROP TABLE opsq.completed_batches;
ALTER TABLE opsq.chunks_completed_rows RENAME TO chunks_completed;
ALTER INDEX opsq.chunks_completed_rows_pkey RENAME TO chunks_completed_pkey;
