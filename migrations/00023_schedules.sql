-- Schedules (DESIGN.md §3 "Work that starts itself", issue 32 point 2).
--
-- - opsq.schedules: one row per schedule of a tenant (name unique per tenant). cron and
--   timezone say when it runs (robfig/cron/v3 syntax, an IANA zone); template is the
--   submission body as the producer gave it (shown back), plan the engine's form of it
--   (JSON text: the submission, its inline chunks, a not_before delay). next_run_at is the
--   scheduled time of the next run not yet made; a run that failed to submit is retried
--   at retry_at (attempts so far) until the run after it is due. An instance fires a due
--   run under a lease (lease_id until lease_until, by the database's clock): a killed or
--   stopped instance's lease ends within a second and another instance fires the run;
--   the submission's idempotency key (schedule:<name>:<time> unless the template sets
--   one) makes a run fired twice one submission. last_submission_id serves overlap.
-- - opsq.schedule_runs: what each run did (submitted with its submission, skipped,
--   missed, failed with why), the last 100 of each schedule (older ones pruned as runs
--   are recorded).
-- Both are small and stay ordinary tables of the coordinator on Citus.

-- +goose Up
CREATE TABLE opsq.schedules (
    id                 bigserial PRIMARY KEY,
    tenant             text NOT NULL,
    name               text NOT NULL,
    cron               text NOT NULL,
    timezone           text NOT NULL,
    template           text NOT NULL,
    plan               text NOT NULL,
    overlap            text NOT NULL CHECK (overlap IN ('skip', 'allow', 'cancel_previous')),
    catch_up           text NOT NULL CHECK (catch_up IN ('none', 'last')),
    paused             boolean NOT NULL DEFAULT false,
    created_by         bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    next_run_at        timestamptz NOT NULL,
    attempts           int NOT NULL DEFAULT 0,
    retry_at           timestamptz,
    last_submission_id bigint,
    lease_id           bigint,
    lease_until        timestamptz,
    UNIQUE (tenant, name)
);
-- The due schedules, read by every instance several times a second.
CREATE INDEX schedules_due ON opsq.schedules ((coalesce(retry_at, next_run_at))) WHERE NOT paused;

CREATE TABLE opsq.schedule_runs (
    schedule_id   bigint NOT NULL REFERENCES opsq.schedules (id) ON DELETE CASCADE,
    scheduled_at  timestamptz NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('submitted', 'skipped', 'missed', 'failed')),
    submission_id bigint,
    error         text NOT NULL DEFAULT '',
    attempts      int NOT NULL DEFAULT 1,
    at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, scheduled_at)
);

-- +goose Down
DROP TABLE opsq.schedule_runs;
DROP TABLE opsq.schedules;
