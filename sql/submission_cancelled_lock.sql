-- Lock a cancelled submission's row for the rest of the transaction, before a slice of its
-- chunks is moved (chunks_skip_range.sql). No row back: it is no longer cancelled (a retry
-- of its unfinished chunks made it in progress again, and moved back the chunks skipped so
-- far): the slices stop. A retry locks the same row first (submission_lock_any.sql), so
-- the two happen one after the other.
SELECT id FROM opsq.submissions_cancelled WHERE id = @id FOR UPDATE
