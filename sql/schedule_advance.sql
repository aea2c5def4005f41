-- Records where a schedule leased under @lease_id goes next and ends the lease: fenced by
-- the lease, so that no row changes when the lease ended and another instance took the
-- schedule (its own advance then counts). @submission_id 0 keeps the last submission.
-- Citus: the coordinator's own tables.
UPDATE opsq.schedules
SET next_run_at = @next_run_at, attempts = @attempts, retry_at = @retry_at,
    last_submission_id = coalesce(nullif(@submission_id::bigint, 0), last_submission_id),
    lease_id = NULL, lease_until = NULL
WHERE id = @id AND lease_id = @lease_id
