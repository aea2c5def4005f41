-- Pause an in-progress submission (the caller holds its lock, submission_lock_any.sql):
-- paused = true, its reservable chunks out of opsq.chunks into opsq.chunks_waiting with
-- ready_at 'infinity' (their retries, input, shard and random order kept), and its
-- waiting ones (a backoff, not_before) held there until resumed. It moves one row per
-- chunk still pending: a pause of 10^6 chunks writes 10^6 rows out and in (about a second
-- and a few hundred MB of WAL), in one statement. The chunks reserved now are among them:
-- their reservations finish as usual. How many chunks it moved comes back.
-- Citus: CTEs run as subplans: a router update (U, by @id), the chunks moved on every
-- shard (S, by submission, not by shard), their rows through the coordinator.
WITH sub AS (
    UPDATE opsq.submissions SET paused = true WHERE id = @id
), moved AS (
    DELETE FROM opsq.chunks c
    WHERE c.submission_id = @id
    RETURNING c.submission_id, c.chunk_index, c.shard, c.random_order, c.retries, c.input, c.attempt_base
), parked AS (
    INSERT INTO opsq.chunks_waiting (submission_id, chunk_index, shard, random_order, retries, input, attempt_base, ready_at)
    SELECT submission_id, chunk_index, shard, random_order, retries, input, attempt_base, 'infinity'
    FROM moved
), held AS (
    UPDATE opsq.chunks_waiting w
    SET ready_at = 'infinity'
    WHERE w.submission_id = @id AND w.ready_at <> 'infinity'
)
SELECT count(*) FROM moved
