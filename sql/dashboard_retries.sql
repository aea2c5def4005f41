-- Retries so far of one submission (the dashboard's detail page): the failed attempts of
-- its chunks still pending and of its failed chunks. A range of the chunks' primary key.
-- Citus: multi-shard: the chunks on every shard (S, read by @id, not by shard), then
-- router (U, by @id).
SELECT (SELECT coalesce(sum(retries), 0) FROM opsq.chunks WHERE submission_id = @id)
     + (SELECT coalesce(sum(retries), 0) FROM opsq.chunks_failed WHERE submission_id = @id) AS retries
