-- The object-storage submissions going in by slices (queuer/submissions/submit.go,
-- submitSliced): a row from before the first slice until the transaction that inserts the
-- submission's row (which deletes it), or until a cut submission's slices are removed. An
-- instance that dies between two slices leaves its row, and every instance's resume job
-- (every minute) removes the slices of a row whose instance is gone (not registered, a
-- later incarnation, or silent for a minute), then the row. A row per large ingest while
-- it runs: a handful at most.

-- +goose Up
CREATE TABLE opsq.ingests (
    submission_id bigint PRIMARY KEY,
    instance      text NOT NULL,
    chunk_count   bigint NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE opsq.ingests;
