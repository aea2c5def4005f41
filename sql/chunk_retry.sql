-- Count one failed attempt of a chunk, if the attempt is the one the token names
-- (@attempt: attempt_base + retries, migrations/00016) and attempts remain, and record its error (chunk_errors keeps the last 5).
-- The chunk waits before it is reservable again: @delay_ms if given (a fail's
-- retry_after), else its submission's backoff, initial × factor^(retries−1) at most max,
-- ±20 % jitter (submission_lifecycle; the defaults 1 s, 2, 1 min without a row). A chunk
-- with a wait, or of a paused submission, moves to chunks_waiting (ready_at; 'infinity'
-- while paused), out of the table the reserves read; one without stays in opsq.chunks
-- (an update of its retries count). With @generation set it also requires the claim the
-- reservation was made under (fencing): the shard still at that generation (a consumer's
-- fail: a token from before the chunk's shard changed owner is stale), and with @claimant
-- set too, held by that instance (the owner releasing an expired lease). One row
-- back: fence_held (false: the fence refused, nothing was written), retries (the new
-- count; NULL when nothing was counted: the chunk is gone, this attempt was counted
-- already, or no attempts remain) and waits (the chunk moved to chunks_waiting).
-- A chunk already in chunks_waiting (its submission was paused while it was in flight) is
-- counted there: its wait becomes the longer of the pause and its backoff.
-- Citus: has a Citus form, chunk_retry_citus.sql (opsq.chunk_retry_steps, migration 00019;
-- layout.go): as it is, its correlated subqueries over CTEs are refused.
WITH fence AS (
    SELECT @generation::bigint IS NULL OR EXISTS (
        SELECT 1 FROM opsq.shard_claims sc
        WHERE sc.shard = @shard AND sc.generation = @generation::bigint
          AND (@claimant::text IS NULL OR sc.claimant = @claimant::text)) AS held
), settings AS (
    SELECT s.paused, s.max_retries, l.backoff_initial_ms, l.backoff_factor, l.backoff_max_ms
    FROM opsq.submissions s
    LEFT JOIN opsq.submission_lifecycle l ON l.id = s.id
    WHERE s.id = @submission_id
), target_ready AS (
    SELECT c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries + 1 AS retries, c.input, c.attempt_base
    FROM opsq.chunks c
    WHERE c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
      AND c.attempt_base + c.retries = @attempt
      AND c.retries < (SELECT max_retries FROM settings)
      AND (SELECT held FROM fence)
    FOR UPDATE OF c
), target_waiting AS (
    -- Skipped whole after one probe when nothing waits (a one-time filter).
    SELECT w.submission_id, w.chunk_index, w.shard, w.random_order, w.retries + 1 AS retries, w.input, w.attempt_base,
           w.ready_at
    FROM opsq.chunks_waiting w
    WHERE w.submission_id = @submission_id AND w.chunk_index = @chunk_index
      AND w.attempt_base + w.retries = @attempt
      AND w.retries < (SELECT max_retries FROM settings)
      AND (SELECT held FROM fence)
      AND EXISTS (SELECT FROM opsq.chunks_waiting)
      AND NOT EXISTS (SELECT FROM target_ready)
    FOR UPDATE OF w
), target AS (
    SELECT t.submission_id, t.chunk_index, t.shard, t.random_order, t.retries, t.input, t.attempt_base, t.in_waiting,
           CASE WHEN st.paused THEN 'infinity'::timestamptz
                ELSE greatest(t.was_ready_at, now() + make_interval(secs => coalesce(@delay_ms::bigint::float8,
                    least(coalesce(st.backoff_max_ms, 60000)::float8,
                          coalesce(st.backoff_initial_ms, 1000) * power(coalesce(st.backoff_factor, 2), t.retries - 1))
                    * (0.8 + random() * 0.4)) / 1000))
           END AS ready_at
    FROM (SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base, false AS in_waiting,
                 NULL::timestamptz AS was_ready_at FROM target_ready
          UNION ALL
          SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base, true, ready_at
          FROM target_waiting) t
    CROSS JOIN settings st
), stays AS (
    UPDATE opsq.chunks c
    SET retries = t.retries
    FROM target t
    -- The key as parameters, not from target: the plan then probes the primary key once.
    WHERE t.ready_at <= now() AND NOT t.in_waiting
      AND c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
    RETURNING c.retries
), leaves AS (
    DELETE FROM opsq.chunks c
    USING target t
    WHERE t.ready_at > now() AND NOT t.in_waiting
      AND c.shard = @shard AND c.submission_id = @submission_id AND c.chunk_index = @chunk_index
    RETURNING c.submission_id
), moved_out AS (
    INSERT INTO opsq.chunks_waiting (submission_id, chunk_index, shard, random_order, retries, input, attempt_base, ready_at)
    SELECT t.submission_id, t.chunk_index, t.shard, t.random_order, t.retries, t.input, t.attempt_base, t.ready_at
    FROM target t JOIN leaves ON true
    RETURNING retries
), kept_waiting AS (
    UPDATE opsq.chunks_waiting w
    SET retries = t.retries, ready_at = t.ready_at
    FROM target t
    WHERE t.in_waiting AND w.submission_id = @submission_id AND w.chunk_index = @chunk_index
    RETURNING w.retries
), waits AS (
    SELECT retries FROM moved_out UNION ALL SELECT retries FROM kept_waiting
), error AS (
    -- The chunk's failures are numbered in order across retries of the submission (a
    -- retry keeps a chunk's errors); the last 5 are kept.
    INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
    SELECT t.submission_id, t.chunk_index,
           coalesce((SELECT max(e.attempt) + 1 FROM opsq.chunk_errors e
                     WHERE e.submission_id = t.submission_id AND e.chunk_index = t.chunk_index), 0),
           @error, @consumer
    FROM target t
    RETURNING attempt
), older AS (
    DELETE FROM opsq.chunk_errors e
    USING target t, error n
    WHERE e.submission_id = t.submission_id AND e.chunk_index = t.chunk_index
      AND e.attempt <= n.attempt - 5
), holds AS (
    -- The attempt's max_simultaneous slots are free (skipped after one probe when no
    -- reservation holds any, as in completions).
    DELETE FROM opsq.simultaneous_holds h
    WHERE h.token = @token AND EXISTS (SELECT FROM target) AND EXISTS (SELECT FROM opsq.simultaneous_holds)
)
-- The NOTIFYs of a retry, at the commit of the statement's transaction: to the instance
-- holding the reservation (@released: the token's payload, when another instance holds it),
-- and of the chunk reservable again (@work: its shard), unless it waits (the promoter
-- announces it when it is due). Channels and payloads are queuer/internal/notify's.
SELECT f.held AS fence_held, coalesce(s.retries, w.retries) AS retries, w.retries IS NOT NULL AS waits,
       CASE WHEN coalesce(s.retries, w.retries) IS NOT NULL AND @released_payload::text IS NOT NULL
            THEN (SELECT true FROM pg_notify(@released_channel, @released_payload)) ELSE false END AS released_notified,
       CASE WHEN s.retries IS NOT NULL AND @work_payload::text IS NOT NULL
            THEN (SELECT true FROM pg_notify(@work_channel, @work_payload)) ELSE false END AS work_notified
FROM fence f LEFT JOIN stays s ON true LEFT JOIN waits w ON true
