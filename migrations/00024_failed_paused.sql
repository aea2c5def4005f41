-- A submission that fails while paused keeps its pause (issue 31, finding 13's rest), as
-- one cancelled while paused does (00021): a retry brings it back in progress still paused,
-- its chunks waiting for a resume, and says so (its status's "paused"). Without the column
-- the pause was lost with the move to submissions_failed, and a retry un-paused it.
-- The default makes the column free to add; rows failed before were not paused for this
-- purpose (false). The Citus form of chunk_fail.sql (00020) moves the column too.

-- +goose Up
-- On Citus the ALTER of a distributed table runs over parallel connections, after which
-- the same transaction may not create a function: sequential mode keeps it on one.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE opsq.submissions_failed ADD COLUMN paused boolean NOT NULL DEFAULT false;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsq.chunk_fail_steps(
    p_shard int, p_submission_id bigint, p_chunk_index int, p_attempt int,
    p_generation bigint, p_claimant text, p_error text, p_consumer text, p_skip_now bigint,
    OUT fence_held boolean, OUT submission_id bigint, OUT finished boolean, OUT dropped boolean,
    OUT sliced boolean, OUT chunks_total bigint)
LANGUAGE plpgsql AS $$
DECLARE
    ch record;
    sub record;
    in_waiting boolean := false;
    skipped bigint := 0;
    n bigint;
BEGIN
    finished := false; dropped := false; sliced := false;
    fence_held := p_generation IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = p_shard AND sc.generation = p_generation
          AND (p_claimant IS NULL OR sc.claimant = p_claimant));
    IF NOT fence_held THEN
        RETURN;
    END IF;
    SELECT c.retries, c.random_order, c.input, c.attempt_base INTO ch FROM opsq.chunks c
    WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index
      AND c.attempt_base + c.retries = p_attempt
    FOR UPDATE;
    IF NOT FOUND THEN
        SELECT w.retries, w.random_order, w.input, w.attempt_base INTO ch FROM opsq.chunks_waiting w
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index
          AND w.attempt_base + w.retries = p_attempt
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        in_waiting := true;
    END IF;
    SELECT s.chunks_total, s.chunks_done, s.chunks_failed + 1 AS failed, s.chunks_skipped,
           CASE WHEN l.id IS NULL THEN true
                ELSE l.max_failed IS NOT NULL AND s.chunks_failed + 1 > l.max_failed END AS fails,
           s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped AS pending
    INTO sub
    FROM opsq.submissions s LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE s.id = p_submission_id
    FOR UPDATE OF s;
    IF NOT FOUND THEN
        RETURN; -- not in progress: a cancel's slices skip and count it
    END IF;

    IF in_waiting THEN
        DELETE FROM opsq.chunks_waiting w
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index;
    ELSE
        DELETE FROM opsq.chunks c
        WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index;
    END IF;
    submission_id := p_submission_id;
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
    VALUES (p_submission_id, p_chunk_index, ch.retries, p_error, false, p_shard, ch.random_order, ch.input, ch.attempt_base);

    IF sub.fails AND sub.pending <= p_skip_now THEN
        WITH gone AS (
            DELETE FROM opsq.chunks c
            WHERE c.submission_id = p_submission_id AND c.chunk_index <> p_chunk_index
            RETURNING c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries, c.input, c.attempt_base
        )
        INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
        SELECT g.submission_id, g.chunk_index, g.retries, p_error, true, g.shard, g.random_order, g.input, g.attempt_base FROM gone g;
        GET DIAGNOSTICS n = ROW_COUNT;
        skipped := n;
        WITH gone AS (
            DELETE FROM opsq.chunks_waiting w
            WHERE w.submission_id = p_submission_id AND w.chunk_index <> p_chunk_index
            RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
        )
        INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
        SELECT g.submission_id, g.chunk_index, g.retries, p_error, true, g.shard, g.random_order, g.input, g.attempt_base FROM gone g;
        GET DIAGNOSTICS n = ROW_COUNT;
        skipped := skipped + n;
    END IF;
    IF sub.fails THEN
        DELETE FROM opsq.simultaneous_holds h WHERE h.submission_id = p_submission_id;
    END IF;

    SELECT coalesce(max(e.attempt) + 1, 0) INTO n FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index;
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
    VALUES (p_submission_id, p_chunk_index, n, p_error, p_consumer);
    DELETE FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index AND e.attempt <= n - 5;

    dropped := sub.fails;
    finished := sub.fails OR sub.chunks_done + sub.failed + sub.chunks_skipped >= sub.chunks_total;
    sliced := sub.fails AND sub.pending > p_skip_now;
    IF sliced THEN
        chunks_total := sub.chunks_total;
    END IF;
    IF NOT finished THEN
        UPDATE opsq.submissions s SET chunks_failed = sub.failed WHERE s.id = p_submission_id;
        RETURN;
    END IF;
    INSERT INTO opsq.submissions_failed
        (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error, tenant, paused)
    SELECT m.id, m.chunks_total, m.chunks_done, sub.failed, m.chunks_skipped + skipped, m.priority, m.max_retries,
           m.metadata, m.strategic_metadata, m.prefix, m.created_at, now(), p_chunk_index, p_error, m.tenant, m.paused
    FROM opsq.submissions m WHERE m.id = p_submission_id;
    DELETE FROM opsq.submissions s WHERE s.id = p_submission_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION opsq.chunk_fail_steps(
    p_shard int, p_submission_id bigint, p_chunk_index int, p_attempt int,
    p_generation bigint, p_claimant text, p_error text, p_consumer text, p_skip_now bigint,
    OUT fence_held boolean, OUT submission_id bigint, OUT finished boolean, OUT dropped boolean,
    OUT sliced boolean, OUT chunks_total bigint)
LANGUAGE plpgsql AS $$
DECLARE
    ch record;
    sub record;
    in_waiting boolean := false;
    skipped bigint := 0;
    n bigint;
BEGIN
    finished := false; dropped := false; sliced := false;
    fence_held := p_generation IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = p_shard AND sc.generation = p_generation
          AND (p_claimant IS NULL OR sc.claimant = p_claimant));
    IF NOT fence_held THEN
        RETURN;
    END IF;
    SELECT c.retries, c.random_order, c.input, c.attempt_base INTO ch FROM opsq.chunks c
    WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index
      AND c.attempt_base + c.retries = p_attempt
    FOR UPDATE;
    IF NOT FOUND THEN
        SELECT w.retries, w.random_order, w.input, w.attempt_base INTO ch FROM opsq.chunks_waiting w
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index
          AND w.attempt_base + w.retries = p_attempt
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        in_waiting := true;
    END IF;
    SELECT s.chunks_total, s.chunks_done, s.chunks_failed + 1 AS failed, s.chunks_skipped,
           CASE WHEN l.id IS NULL THEN true
                ELSE l.max_failed IS NOT NULL AND s.chunks_failed + 1 > l.max_failed END AS fails,
           s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped AS pending
    INTO sub
    FROM opsq.submissions s LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE s.id = p_submission_id
    FOR UPDATE OF s;
    IF NOT FOUND THEN
        RETURN; -- not in progress: a cancel's slices skip and count it
    END IF;

    IF in_waiting THEN
        DELETE FROM opsq.chunks_waiting w
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index;
    ELSE
        DELETE FROM opsq.chunks c
        WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index;
    END IF;
    submission_id := p_submission_id;
    INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
    VALUES (p_submission_id, p_chunk_index, ch.retries, p_error, false, p_shard, ch.random_order, ch.input, ch.attempt_base);

    IF sub.fails AND sub.pending <= p_skip_now THEN
        WITH gone AS (
            DELETE FROM opsq.chunks c
            WHERE c.submission_id = p_submission_id AND c.chunk_index <> p_chunk_index
            RETURNING c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries, c.input, c.attempt_base
        )
        INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
        SELECT g.submission_id, g.chunk_index, g.retries, p_error, true, g.shard, g.random_order, g.input, g.attempt_base FROM gone g;
        GET DIAGNOSTICS n = ROW_COUNT;
        skipped := n;
        WITH gone AS (
            DELETE FROM opsq.chunks_waiting w
            WHERE w.submission_id = p_submission_id AND w.chunk_index <> p_chunk_index
            RETURNING w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries, w.input, w.attempt_base
        )
        INSERT INTO opsq.chunks_failed (submission_id, chunk_index, retries, error, skipped, shard, random_order, input, attempt_base)
        SELECT g.submission_id, g.chunk_index, g.retries, p_error, true, g.shard, g.random_order, g.input, g.attempt_base FROM gone g;
        GET DIAGNOSTICS n = ROW_COUNT;
        skipped := skipped + n;
    END IF;
    IF sub.fails THEN
        DELETE FROM opsq.simultaneous_holds h WHERE h.submission_id = p_submission_id;
    END IF;

    SELECT coalesce(max(e.attempt) + 1, 0) INTO n FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index;
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
    VALUES (p_submission_id, p_chunk_index, n, p_error, p_consumer);
    DELETE FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index AND e.attempt <= n - 5;

    dropped := sub.fails;
    finished := sub.fails OR sub.chunks_done + sub.failed + sub.chunks_skipped >= sub.chunks_total;
    sliced := sub.fails AND sub.pending > p_skip_now;
    IF sliced THEN
        chunks_total := sub.chunks_total;
    END IF;
    IF NOT finished THEN
        UPDATE opsq.submissions s SET chunks_failed = sub.failed WHERE s.id = p_submission_id;
        RETURN;
    END IF;
    INSERT INTO opsq.submissions_failed
        (id, chunks_total, chunks_done, chunks_failed, chunks_skipped, priority, max_retries, metadata,
         strategic_metadata, prefix, created_at, finished_at, failed_chunk_index, error, tenant)
    SELECT m.id, m.chunks_total, m.chunks_done, sub.failed, m.chunks_skipped + skipped, m.priority, m.max_retries,
           m.metadata, m.strategic_metadata, m.prefix, m.created_at, now(), p_chunk_index, p_error, m.tenant
    FROM opsq.submissions m WHERE m.id = p_submission_id;
    DELETE FROM opsq.submissions s WHERE s.id = p_submission_id;
END
$$;
-- +goose StatementEnd
ALTER TABLE opsq.submissions_failed DROP COLUMN paused;
