-- chunk_retry.sql in the shape Citus can run (sql/layout.go: chunkRetryCitus). Citus
-- refuses its row locks across the two co-location groups and never routes its CTEs that
-- insert; here each step is its own statement on one node: the fence and the holds on the
-- coordinator, the submission's settings and the chunk's errors on the submission's node,
-- the chunk's row lock and move on its shard's node. PL/pgSQL runs on the coordinator and
-- Citus routes each statement by its parameters. Same contract as chunk_retry.sql (read it
-- there), but the NOTIFYs, which the caller sends when retries is not NULL. On one
-- PostgreSQL the function exists and is not called.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION opsq.chunk_retry_steps(
    p_shard int, p_submission_id bigint, p_chunk_index int, p_attempt int,
    p_generation bigint, p_claimant text, p_delay_ms bigint, p_error text, p_consumer text, p_token text,
    OUT fence_held boolean, OUT retries int, OUT waits boolean)
LANGUAGE plpgsql AS $$
DECLARE
    st record;
    ch record;
    in_waiting boolean := false;
    ready timestamptz;
    n int;
BEGIN
    waits := false;
    fence_held := p_generation IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = p_shard AND sc.generation = p_generation
          AND (p_claimant IS NULL OR sc.claimant = p_claimant));
    IF NOT fence_held THEN
        RETURN;
    END IF;
    SELECT s.paused, s.max_retries, l.backoff_initial_ms, l.backoff_factor, l.backoff_max_ms INTO st
    FROM opsq.submissions s LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE s.id = p_submission_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT c.retries, NULL::timestamptz AS ready_at INTO ch FROM opsq.chunks c
    WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index
      AND c.attempt_base + c.retries = p_attempt AND c.retries < st.max_retries
    FOR UPDATE;
    IF NOT FOUND THEN
        SELECT w.retries, w.ready_at INTO ch FROM opsq.chunks_waiting w
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index
          AND w.attempt_base + w.retries = p_attempt AND w.retries < st.max_retries
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        in_waiting := true;
    END IF;
    retries := ch.retries + 1;
    ready := CASE WHEN st.paused THEN 'infinity'::timestamptz
                  ELSE greatest(ch.ready_at, now() + make_interval(secs => coalesce(p_delay_ms::float8,
                      least(coalesce(st.backoff_max_ms, 60000)::float8,
                            coalesce(st.backoff_initial_ms, 1000) * power(coalesce(st.backoff_factor, 2), retries - 1))
                      * (0.8 + random() * 0.4)) / 1000)) END;
    IF in_waiting THEN
        UPDATE opsq.chunks_waiting w SET retries = chunk_retry_steps.retries, ready_at = ready
        WHERE w.shard = p_shard AND w.submission_id = p_submission_id AND w.chunk_index = p_chunk_index;
        waits := true;
    ELSIF ready <= now() THEN
        UPDATE opsq.chunks c SET retries = chunk_retry_steps.retries
        WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index;
    ELSE
        -- Out of the table the reserves read: deleted and inserted on the same node.
        SELECT c.random_order, c.input, c.attempt_base INTO ch FROM opsq.chunks c
        WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index;
        DELETE FROM opsq.chunks c
        WHERE c.shard = p_shard AND c.submission_id = p_submission_id AND c.chunk_index = p_chunk_index;
        INSERT INTO opsq.chunks_waiting (submission_id, chunk_index, shard, random_order, retries, input, attempt_base, ready_at)
        VALUES (p_submission_id, p_chunk_index, p_shard, ch.random_order, chunk_retry_steps.retries, ch.input, ch.attempt_base, ready);
        waits := true;
    END IF;
    SELECT coalesce(max(e.attempt) + 1, 0) INTO n FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index;
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
    VALUES (p_submission_id, p_chunk_index, n, p_error, p_consumer);
    DELETE FROM opsq.chunk_errors e
    WHERE e.submission_id = p_submission_id AND e.chunk_index = p_chunk_index AND e.attempt <= n - 5;
    DELETE FROM opsq.simultaneous_holds h WHERE h.token = p_token;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION opsq.chunk_retry_steps(int, bigint, int, int, bigint, text, bigint, text, text, text);
