-- The chunks of a submission that is no longer in progress: one primary-key range per shard.
DELETE FROM opsq.chunks WHERE submission_id = @submission_id
