-- Submissions after other submissions (issue 32, DESIGN.md §3 "Dependencies",
-- docs/dependencies.md).
--
-- - submission_after: one row per submission submitted with "after" (a child): its policy,
--   whether its chunks wait for its parents (waiting: they sit in opsq.chunks_waiting with
--   ready_at 'infinity', as a pause holds them, so that no reserve reads past them and no
--   promoter moves them), and, once a parent that failed or was cancelled cancelled it,
--   that parent and the failure shown in its status (a retry of that parent re-arms it).
-- - submission_parents: one row per (child, parent), with the parent's place in "after".
--   Read by child (its status, whether it may start) and by parent (the children to look
--   at when a parent finishes, or is retried).
-- Both are small (one row per child, at most 100 per child), written once at the child's
-- submit and by the few transitions above, deleted with the child by retention. On Citus
-- they stay on the coordinator (local tables).

-- +goose Up
CREATE TABLE opsq.submission_after (
    id           bigint PRIMARY KEY,
    policy       text NOT NULL CHECK (policy IN ('completed', 'finished')),
    waiting      boolean NOT NULL,
    cancelled_by bigint,
    failure      text
);
-- The children waiting on parents, for the periodic re-check: empty of anything else.
CREATE INDEX submission_after_waiting ON opsq.submission_after (id) WHERE waiting;
-- The children a parent cancelled, for the re-arm of a retry.
CREATE INDEX submission_after_cancelled_by ON opsq.submission_after (cancelled_by) WHERE cancelled_by IS NOT NULL;

CREATE TABLE opsq.submission_parents (
    child    bigint NOT NULL,
    parent   bigint NOT NULL,
    position smallint NOT NULL,
    PRIMARY KEY (child, parent)
);
CREATE INDEX submission_parents_parent ON opsq.submission_parents (parent);

-- +goose Down
-- Children still waiting become reservable: the schema before this one has no dependency
-- to wait for. (Their ids first, as an array: Citus does not join chunks_waiting, by
-- shard, to the submissions, by id.)
INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order, retries, input, attempt_base)
SELECT w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
FROM opsq.chunks_waiting w
WHERE w.submission_id = ANY(ARRAY(
    SELECT a.id FROM opsq.submission_after a JOIN opsq.submissions s ON s.id = a.id
    WHERE a.waiting AND NOT s.paused));
DELETE FROM opsq.chunks_waiting w
WHERE w.submission_id = ANY(ARRAY(
    SELECT a.id FROM opsq.submission_after a JOIN opsq.submissions s ON s.id = a.id
    WHERE a.waiting AND NOT s.paused));
DROP TABLE opsq.submission_parents;
DROP TABLE opsq.submission_after;
