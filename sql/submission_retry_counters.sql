-- Uncount the chunks a retry made pending again from an in-progress submission, and set its
-- attempt budget (@max_retries NULL: unchanged).
-- Citus: router (U, by @id).
UPDATE opsq.submissions
SET chunks_failed  = greatest(chunks_failed - @failed::int, 0),
    chunks_skipped = greatest(chunks_skipped - @skipped::int, 0),
    max_retries    = coalesce(@max_retries::int, max_retries)
WHERE id = @id
