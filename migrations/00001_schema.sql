-- The opsq schema. Every object lives in the schema "opsq" so that opsq can share a
-- database. Why each index exists and what it costs at insert time is written in
-- migrations/README.md; keep the two in step.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS opsq;

-- Cluster-wide settings, one source of truth for every instance. Durations are Go duration
-- strings. shard_count is fixed here, at the first migration: it can be chosen with the
-- session setting opsq.shard_count (opsq migrate --shard-count), and the trigger below
-- refuses to change it afterwards, because every chunk row already carries its shard.
CREATE TABLE opsq.settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

INSERT INTO opsq.settings (key, value) VALUES
    ('shard_count', coalesce(nullif(current_setting('opsq.shard_count', true), ''), '64')),
    ('claim_renew_interval', '2s'),
    ('claim_soft_expiry', '10s'),
    ('claim_hard_expiry', '60s'),
    ('instance_heartbeat_timeout', '10s'),
    ('drain_timeout', '60s'),
    ('retention', '24h'),
    ('default_max_retries', '10');

-- +goose StatementBegin
CREATE FUNCTION opsq.settings_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'opsq.settings: % cannot be deleted; update its value instead', OLD.key;
    END IF;
    IF OLD.key = 'shard_count' AND (NEW.key <> OLD.key OR NEW.value <> OLD.value) THEN
        RAISE EXCEPTION 'opsq.settings: shard_count is fixed when the database is first migrated';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER settings_guard BEFORE UPDATE OR DELETE ON opsq.settings
    FOR EACH ROW EXECUTE FUNCTION opsq.settings_guard();

-- Live and recently seen instances. node_id is the 10-bit generator id this instance puts
-- into the snowflake ids it makes; the UNIQUE constraint is what keeps two live instances
-- from making the same id.
CREATE TABLE opsq.instances (
    id            text PRIMARY KEY,
    node_id       int NOT NULL UNIQUE CHECK (node_id BETWEEN 0 AND 1023),
    advertise_url text NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    draining      boolean NOT NULL DEFAULT false,
    version       text NOT NULL DEFAULT ''
);

-- One row per shard: who owns it, until when, under which fencing generation.
CREATE TABLE opsq.shard_claims (
    shard           int PRIMARY KEY,
    claimant        text,
    generation      bigint NOT NULL DEFAULT 0,
    soft_expires_at timestamptz,
    hard_expires_at timestamptz,
    inflight        int NOT NULL DEFAULT 0,
    available       boolean NOT NULL DEFAULT true,
    acquired_at     timestamptz,
    renewed_at      timestamptz,
    owner_switches  bigint NOT NULL DEFAULT 0,
    disabled        boolean NOT NULL DEFAULT false
);

INSERT INTO opsq.shard_claims (shard)
SELECT s FROM generate_series(0, (SELECT value::int FROM opsq.settings WHERE key = 'shard_count') - 1) AS s;

-- Submissions move between four tables as their state changes; there is no status column
-- to scan. The in-progress table holds the counters that completions advance.
CREATE TABLE opsq.submissions (
    id                 bigint PRIMARY KEY,
    chunks_total       int NOT NULL,
    chunks_done        int NOT NULL DEFAULT 0,
    priority           bigint NOT NULL DEFAULT 0,
    max_retries        int NOT NULL,
    metadata           text NOT NULL DEFAULT '',
    strategic_metadata jsonb NOT NULL DEFAULT '{}',
    prefix             text,
    created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE opsq.submissions_completed (
    id                 bigint PRIMARY KEY,
    chunks_total       int NOT NULL,
    chunks_done        int NOT NULL,
    priority           bigint NOT NULL,
    max_retries        int NOT NULL,
    metadata           text NOT NULL,
    strategic_metadata jsonb NOT NULL,
    prefix             text,
    created_at         timestamptz NOT NULL,
    finished_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX submissions_completed_finished_at ON opsq.submissions_completed (finished_at);

CREATE TABLE opsq.submissions_failed (
    id                 bigint PRIMARY KEY,
    chunks_total       int NOT NULL,
    chunks_done        int NOT NULL,
    chunks_failed      int NOT NULL,
    priority           bigint NOT NULL,
    max_retries        int NOT NULL,
    metadata           text NOT NULL,
    strategic_metadata jsonb NOT NULL,
    prefix             text,
    created_at         timestamptz NOT NULL,
    finished_at        timestamptz NOT NULL DEFAULT now(),
    failed_chunk_index int NOT NULL,
    error              text NOT NULL
);
CREATE INDEX submissions_failed_finished_at ON opsq.submissions_failed (finished_at);

CREATE TABLE opsq.submissions_cancelled (
    id                 bigint PRIMARY KEY,
    chunks_total       int NOT NULL,
    chunks_done        int NOT NULL,
    priority           bigint NOT NULL,
    max_retries        int NOT NULL,
    metadata           text NOT NULL,
    strategic_metadata jsonb NOT NULL,
    prefix             text,
    created_at         timestamptz NOT NULL,
    finished_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX submissions_cancelled_finished_at ON opsq.submissions_cancelled (finished_at);

-- Every submission in one relation, with its state. A lookup by id becomes four primary-key
-- probes; a filter on state removes the other branches at plan time.
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

-- Strategic metadata, one row per (key, value, submission), kept for every state until
-- retention deletes the submission. value is jsonb so that 42 and "42" stay distinct.
CREATE TABLE opsq.strategic_metadata (
    key           text NOT NULL,
    value         jsonb NOT NULL,
    submission_id bigint NOT NULL,
    PRIMARY KEY (key, value, submission_id)
);
CREATE INDEX strategic_metadata_submission_id ON opsq.strategic_metadata (submission_id);

-- Idempotency keys outlive the move of a submission between tables, so they have a table
-- of their own; retention deletes a key with its submission.
CREATE TABLE opsq.idempotency_keys (
    key           text PRIMARY KEY,
    submission_id bigint NOT NULL
);
CREATE INDEX idempotency_keys_submission_id ON opsq.idempotency_keys (submission_id);

-- Reservable chunks, partitioned by shard so that a strategy over an instance's shards is a
-- merge of per-shard ordered index scans. input is NULL in object-storage mode.
CREATE TABLE opsq.chunks (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    shard         int NOT NULL,
    random_order  int NOT NULL,
    retries       int NOT NULL DEFAULT 0,
    input         bytea,
    PRIMARY KEY (submission_id, chunk_index, shard)
) PARTITION BY LIST (shard);

-- +goose StatementBegin
DO $$
DECLARE
    n int := (SELECT value::int FROM opsq.settings WHERE key = 'shard_count');
BEGIN
    IF n < 1 OR n > 4096 THEN
        RAISE EXCEPTION 'opsq.shard_count must be between 1 and 4096, not %', n;
    END IF;
    FOR s IN 0 .. n - 1 LOOP
        EXECUTE format('CREATE TABLE opsq.chunks_%s PARTITION OF opsq.chunks FOR VALUES IN (%s)', s, s);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE INDEX chunks_random_order ON opsq.chunks (random_order, submission_id, chunk_index);

CREATE TABLE opsq.chunks_completed (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    output        bytea NOT NULL,
    completed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (submission_id, chunk_index)
);

-- Failed chunks: the one whose attempts ran out (skipped = false) and, when a submission
-- fails, the chunks it still had (skipped = true).
CREATE TABLE opsq.chunks_failed (
    submission_id bigint NOT NULL,
    chunk_index   int NOT NULL,
    retries       int NOT NULL,
    error         text NOT NULL,
    skipped       boolean NOT NULL,
    failed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (submission_id, chunk_index)
);

-- +goose Down
-- The schema itself stays: it also holds goose's version table.
DROP TABLE opsq.chunks_failed, opsq.chunks_completed, opsq.chunks, opsq.idempotency_keys,
    opsq.strategic_metadata;
DROP VIEW opsq.submission_status;
DROP TABLE opsq.submissions_cancelled, opsq.submissions_failed, opsq.submissions_completed,
    opsq.submissions, opsq.shard_claims, opsq.instances, opsq.settings;
DROP FUNCTION opsq.settings_guard();
