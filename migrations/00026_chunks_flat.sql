-- On one PostgreSQL, opsq.chunks becomes one table instead of 64 LIST partitions by
-- shard (issue 29). The complete statement probes each chunk of a batch by primary key
-- through a nested loop; over the partitions the inner side was an Append with run-time
-- pruning, and PostgreSQL 15 rescans it by walking all 64 subplans for every chunk: on one
-- table the same statement costs half the CPU (docs/capacity.md). The candidate queries
-- keep reading each shard in order through indexes that lead with the shard:
--   - chunks_pkey (submission_id, chunk_index, shard), as before: the per-submission
--     statements (complete, fail, retry, cancel, results) find a submission's chunks by it;
--   - chunks_random_order (shard, random_order, submission_id, chunk_index): random;
--   - chunks_shard_submission (shard, submission_id, chunk_index): oldest_first,
--     newest_first and one submission's scan (select_only).
-- The candidate query of a leaf is a UNION ALL of one ordered scan per shard, merged
-- (sql/candidates.go). On a Citus coordinator this migration does nothing: 00017 made
-- chunks one table there already, distributed by shard.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF (SELECT relkind FROM pg_class WHERE oid = 'opsq.chunks'::regclass) <> 'p' THEN
        RETURN;
    END IF;
    CREATE TABLE opsq.chunks_flat (LIKE opsq.chunks INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
    -- The rows first, the indexes after: one sort per index instead of a descent per row.
    INSERT INTO opsq.chunks_flat SELECT * FROM opsq.chunks;
    DROP TABLE opsq.chunks;
    ALTER TABLE opsq.chunks_flat RENAME TO chunks;
    ALTER TABLE opsq.chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (submission_id, chunk_index, shard);
    CREATE INDEX chunks_random_order ON opsq.chunks (shard, random_order, submission_id, chunk_index);
    CREATE INDEX chunks_shard_submission ON opsq.chunks (shard, submission_id, chunk_index);
    ANALYZE opsq.chunks;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    n int := (SELECT value::int FROM opsq.settings WHERE key = 'shard_count');
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF (SELECT relkind FROM pg_class WHERE oid = 'opsq.chunks'::regclass) = 'p' THEN
        RETURN;
    END IF;
    -- Back to one LIST partition per shard, rows and all (as 00017's Down).
    ALTER TABLE opsq.chunks RENAME TO chunks_flat;
    ALTER INDEX opsq.chunks_pkey RENAME TO chunks_flat_pkey;
    ALTER INDEX opsq.chunks_random_order RENAME TO chunks_flat_random_order;
    ALTER INDEX opsq.chunks_shard_submission RENAME TO chunks_flat_shard_submission;
    CREATE TABLE opsq.chunks (LIKE opsq.chunks_flat INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY LIST (shard);
    ALTER TABLE opsq.chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (submission_id, chunk_index, shard);
    FOR s IN 0 .. n - 1 LOOP
        EXECUTE format('CREATE TABLE opsq.chunks_%s PARTITION OF opsq.chunks FOR VALUES IN (%s)', s, s);
    END LOOP;
    CREATE INDEX chunks_random_order ON opsq.chunks (random_order, submission_id, chunk_index);
    INSERT INTO opsq.chunks SELECT * FROM opsq.chunks_flat;
    DROP TABLE opsq.chunks_flat;
    ANALYZE opsq.chunks;
END
$$;
-- +goose StatementEnd
