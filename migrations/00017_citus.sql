-- On a Citus coordinator (the citus extension is installed), opsq's tables become Citus
-- tables here; on one PostgreSQL this migration does nothing. DESIGN.md §4 "Past one
-- PostgreSQL: Citus", docs/citus.md. The layout:
--   - the chunks of every state that a reserve, complete or fail of one of opsq's shards
--     reads and writes (chunks, chunks_waiting) are distributed by opsq's shard, in one
--     co-location group, so that a statement on one opsq shard is a router statement on
--     the node that holds it. chunks loses its LIST partitions: a partition of a
--     distributed table is itself distributed, which would make shards × shards tables;
--     each Citus shard holds the rows of the opsq shards that hash to it.
--   - the tables of a submission (its row in each state, its lifecycle and trace, its
--     completed outputs, failed chunks and chunk errors) are distributed by submission id,
--     in a second group;
--   - strategic_metadata is a reference table (on every node), because candidate queries
--     probe it on a chunk's submission id, which is not the chunks' distribution column;
--   - everything else (settings, claims, instances, keys, tenants, throttles, rates,
--     holds, sessions, idempotency keys, goose's version table) stays an ordinary table of
--     the coordinator: the claims' SERIALIZABLE transactions, the advisory locks and the
--     NOTIFYs then mean what they mean on one PostgreSQL.
-- Only an empty opsq database is converted (a fresh one: migrate up on an existing
-- single-node database fails here and changes nothing). opsq migrate up refuses on a
-- Citus worker before any migration (migrations.checkCitus).

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    n int := (SELECT value::int FROM opsq.settings WHERE key = 'shard_count');
    t record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM opsq.chunks) OR EXISTS (SELECT FROM opsq.chunks_waiting)
       OR EXISTS (SELECT FROM opsq.submission_status) THEN
        RAISE EXCEPTION 'opsq on Citus: this database already holds submissions, and opsq converts only an empty database to Citus tables'
            USING HINT = 'migrate a new database on the coordinator and move the work there (docs/citus.md), or drop the citus extension to stay on one PostgreSQL';
    END IF;

    CREATE TABLE opsq.chunks_flat (LIKE opsq.chunks INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
    DROP TABLE opsq.chunks;
    ALTER TABLE opsq.chunks_flat RENAME TO chunks;
    ALTER TABLE opsq.chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (submission_id, chunk_index, shard);
    CREATE INDEX chunks_random_order ON opsq.chunks (random_order, submission_id, chunk_index);
    -- A distributed table's primary key holds its distribution column.
    ALTER TABLE opsq.chunks_waiting DROP CONSTRAINT chunks_waiting_pkey;
    ALTER TABLE opsq.chunks_waiting ADD CONSTRAINT chunks_waiting_pkey PRIMARY KEY (submission_id, chunk_index, shard);

    PERFORM create_distributed_table('opsq.chunks', 'shard', shard_count => n, colocate_with => 'none');
    PERFORM create_distributed_table('opsq.chunks_waiting', 'shard', colocate_with => 'opsq.chunks');

    PERFORM create_distributed_table('opsq.submissions', 'id', shard_count => n, colocate_with => 'none');
    FOR t IN SELECT * FROM (VALUES
            ('opsq.submissions_completed', 'id'), ('opsq.submissions_failed', 'id'),
            ('opsq.submissions_cancelled', 'id'), ('opsq.submission_lifecycle', 'id'),
            ('opsq.submission_traces', 'id'), ('opsq.completed_batches', 'submission_id'),
            ('opsq.chunks_failed', 'submission_id'), ('opsq.chunk_errors', 'submission_id')
        ) AS v(name, col) LOOP
        PERFORM create_distributed_table(t.name, t.col, colocate_with => 'opsq.submissions');
    END LOOP;

    PERFORM create_reference_table('opsq.strategic_metadata');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    n int := (SELECT value::int FROM opsq.settings WHERE key = 'shard_count');
    t text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'opsq.chunks'::regclass) THEN
        RETURN;
    END IF;
    FOREACH t IN ARRAY ARRAY['opsq.strategic_metadata', 'opsq.chunk_errors', 'opsq.chunks_failed',
            'opsq.completed_batches', 'opsq.submission_traces', 'opsq.submission_lifecycle',
            'opsq.submissions_cancelled', 'opsq.submissions_failed', 'opsq.submissions_completed',
            'opsq.submissions', 'opsq.chunks_waiting', 'opsq.chunks'] LOOP
        PERFORM undistribute_table(t::regclass);
    END LOOP;

    ALTER TABLE opsq.chunks_waiting DROP CONSTRAINT chunks_waiting_pkey;
    ALTER TABLE opsq.chunks_waiting ADD CONSTRAINT chunks_waiting_pkey PRIMARY KEY (submission_id, chunk_index);

    -- Back to one LIST partition per shard, rows and all.
    ALTER TABLE opsq.chunks RENAME TO chunks_flat;
    ALTER INDEX opsq.chunks_pkey RENAME TO chunks_flat_pkey;
    ALTER INDEX opsq.chunks_random_order RENAME TO chunks_flat_random_order;
    CREATE TABLE opsq.chunks (LIKE opsq.chunks_flat INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY LIST (shard);
    ALTER TABLE opsq.chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (submission_id, chunk_index, shard);
    FOR s IN 0 .. n - 1 LOOP
        EXECUTE format('CREATE TABLE opsq.chunks_%s PARTITION OF opsq.chunks FOR VALUES IN (%s)', s, s);
    END LOOP;
    CREATE INDEX chunks_random_order ON opsq.chunks (random_order, submission_id, chunk_index);
    INSERT INTO opsq.chunks SELECT * FROM opsq.chunks_flat;
    DROP TABLE opsq.chunks_flat;
END
$$;
-- +goose StatementEnd
