-- Complete a batch of chunks in one statement: the first completion of a chunk moves it to
-- completed_batches and counts it on its submission; a chunk already gone is left alone.
-- The submissions' rows are locked in id order first, so that concurrent batches (on other
-- instances) cannot deadlock on them.
WITH input AS (
    SELECT * FROM unnest(@submission_ids::bigint[], @chunk_indexes::int[], @shards::int[], @outputs::bytea[])
        AS t(submission_id, chunk_index, shard, output)
), locked AS (
    SELECT s.id FROM opsq.submissions s
    WHERE s.id IN (SELECT submission_id FROM input)
    ORDER BY s.id
    FOR NO KEY UPDATE
), done AS (
    DELETE FROM opsq.chunks c
    USING input i
    WHERE c.shard = i.shard AND c.submission_id = i.submission_id AND c.chunk_index = i.chunk_index
      AND c.submission_id IN (SELECT id FROM locked)
    RETURNING c.submission_id, c.chunk_index, c.shard, i.output
), stored AS (
    -- One row per submission of the batch (migrations/00006_completed_batches.sql).
    INSERT INTO opsq.completed_batches (submission_id, first_index, chunk_indexes, outputs)
    SELECT submission_id, min(chunk_index), array_agg(chunk_index), array_agg(output)
    FROM done GROUP BY submission_id
), freed AS (
    -- The max_simultaneous slots of these reservations (and of stale repeats) are free, and
    -- so are those of every reservation of a chunk completed here: a stale token's
    -- completion ends the live reservation of its chunk (wherever it is held), whose hold
    -- belongs to another token. (Two deletes, each by an index; a row both match is
    -- deleted once.)
    DELETE FROM opsq.simultaneous_holds WHERE token = ANY(@tokens::text[])
), freed_chunks AS (
    DELETE FROM opsq.simultaneous_holds h
    USING done d
    WHERE h.submission_id = d.submission_id AND h.chunk_index = d.chunk_index
), counted AS (
    UPDATE opsq.submissions s
    SET chunks_done = s.chunks_done + d.n
    FROM (SELECT submission_id, count(*) AS n FROM done GROUP BY submission_id) d
    WHERE s.id = d.submission_id
    RETURNING s.id, s.chunks_done = s.chunks_total AS finished
)
SELECT d.submission_id, d.chunk_index, d.shard, coalesce(c.finished, false)
FROM done d LEFT JOIN counted c ON c.id = d.submission_id
