-- The chunks of many submissions that are no longer in progress (queuer.CancelMany): what
-- chunks_delete_submission.sql deletes for one, in one statement, so that each partition
-- is scanned once per statement rather than once per submission.
DELETE FROM opsq.chunks WHERE submission_id = ANY(@submission_ids::bigint[])
