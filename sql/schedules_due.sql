-- Leases up to @limit schedules whose run (or a failed run's retry) is due at @now (null:
-- the database's now()) and that no live lease holds, for @lease_us microseconds of the
-- database's clock, under @lease_id. SKIP LOCKED: instances reading at once share the due
-- schedules rather than wait on each other. A lease that ends (its instance killed or
-- stopped) lets another instance fire the run.
-- Citus: the coordinator's own tables.
UPDATE opsq.schedules s
SET lease_id = @lease_id, lease_until = now() + make_interval(secs => @lease_us::float8 / 1e6)
FROM (
    SELECT id FROM opsq.schedules
    WHERE NOT paused AND coalesce(retry_at, next_run_at) <= coalesce(@now::timestamptz, now())
      AND (lease_until IS NULL OR lease_until < now())
    ORDER BY coalesce(retry_at, next_run_at)
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
) due
WHERE s.id = due.id
RETURNING s.id, s.tenant, s.name, s.cron, s.timezone, s.plan, s.overlap, s.catch_up, s.created_by,
    s.next_run_at, s.attempts, s.last_submission_id, coalesce(@now::timestamptz, now()) AS now
