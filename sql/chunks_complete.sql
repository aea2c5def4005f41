-- Complete a batch of chunks in one statement: the first completion of a chunk moves it to
-- completed_batches and counts it on its submission; a chunk already gone is left alone. A
-- chunk that waits in chunks_waiting (retried with a backoff after this attempt, or its
-- submission paused while it was in flight) is completed there: a late completion wins if
-- it comes first. A submission whose every chunk is finished (done + failed + skipped =
-- total) is reported finished.
-- @locked are the batch's submissions locked by submissions_lock.sql just before, in the
-- same transaction: chunks of others (finished since) are left alone too. @rows are the
-- chunks' row addresses where the caller knows them, NULL elsewhere (done_by_row).
-- Citus: has a Citus form (layout.go): chunks_complete_shard.sql per opsq shard (router, S), completed_batch_insert.sql and submission_count_done.sql per submission (router, U), holds_release_completed.sql on the coordinator; as it is, its unnest of the keys goes to every shard and is refused.
WITH input AS (
    SELECT * FROM unnest(@submission_ids::bigint[], @chunk_indexes::int[], @shards::int[], @outputs::bytea[], @rows::tid[])
        WITH ORDINALITY AS t(submission_id, chunk_index, shard, output, row_addr, pos)
    -- On the input, not on the chunks: a condition on c.submission_id would lead the
    -- planner away from one primary-key probe per chunk.
    WHERE submission_id = ANY(@locked::bigint[])
), done_by_row AS (
    -- A chunk whose row's address the caller knows (sql.RowAddr: the instance that reserved
    -- it read it) is found by that address, a TID scan, and checked against its key:
    -- 1.7-3.4 µs of PostgreSQL's time less per chunk than the descent of the primary key,
    -- over 600 000 chunks (docs/capacity.md). A row moved since, or another chunk's row at that address, is
    -- not deleted here; the caller completes those chunks again by key. The key is
    -- checked with IS NOT DISTINCT FROM, the same test as = on these NOT NULL columns, which
    -- no index answers: on a small table the planner would rather descend an index by the
    -- key and filter by the address, and the generic plan made then stays the connection's.
    DELETE FROM opsq.chunks c
    USING input i
    WHERE c.ctid = i.row_addr
      AND c.shard IS NOT DISTINCT FROM i.shard AND c.submission_id IS NOT DISTINCT FROM i.submission_id
      AND c.chunk_index IS NOT DISTINCT FROM i.chunk_index
    RETURNING c.submission_id, c.chunk_index, i.pos, i.output
), done_by_key AS (
    -- Any other, by its primary key. (The two deletes are given disjoint chunks, so that no
    -- row is the target of both.)
    DELETE FROM opsq.chunks c
    USING input i
    WHERE i.row_addr IS NULL
      AND c.shard = i.shard AND c.submission_id = i.submission_id AND c.chunk_index = i.chunk_index
    RETURNING c.submission_id, c.chunk_index, i.pos, i.output
), done_ready AS (
    SELECT * FROM done_by_row UNION ALL SELECT * FROM done_by_key
), done_waiting AS (
    -- Skipped whole after one probe when nothing waits (a one-time filter), as in every
    -- workload whose chunks do not fail.
    DELETE FROM opsq.chunks_waiting w
    USING input i
    WHERE w.submission_id = i.submission_id AND w.chunk_index = i.chunk_index
      AND EXISTS (SELECT FROM opsq.chunks_waiting)
    RETURNING w.submission_id, w.chunk_index, i.pos, i.output
), done AS (
    SELECT * FROM done_ready UNION ALL SELECT * FROM done_waiting
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
    -- deleted once.) When no reservation holds a slot at all, as in every workload without
    -- max_simultaneous, each delete is skipped whole after one probe (a one-time filter),
    -- instead of probing the holds' indexes for every token and chunk: about a third of
    -- the statement's buffers (docs/capacity.md).
    DELETE FROM opsq.simultaneous_holds
    WHERE token = ANY(@tokens::text[]) AND EXISTS (SELECT FROM opsq.simultaneous_holds)
), freed_chunks AS (
    DELETE FROM opsq.simultaneous_holds h
    USING done d
    WHERE h.submission_id = d.submission_id AND h.chunk_index = d.chunk_index
      AND EXISTS (SELECT FROM opsq.simultaneous_holds)
), counted AS (
    UPDATE opsq.submissions s
    SET chunks_done = s.chunks_done + d.n
    FROM (SELECT submission_id, count(*) AS n FROM done GROUP BY submission_id) d
    WHERE s.id = d.submission_id
    RETURNING s.id, s.chunks_done + s.chunks_failed + s.chunks_skipped = s.chunks_total AS finished
)
SELECT coalesce((SELECT array_agg(pos::int) FROM done), '{}'),
       coalesce((SELECT array_agg(id) FROM counted WHERE finished), '{}')
