-- Moves a batch of schedules leased under @lease_id on to their next runs, ends their
-- leases and records their runs, in one statement for the batch (a due batch costs one
-- statement, not a transaction per schedule). Fenced by the lease, schedule by schedule:
-- a schedule whose lease ended (another instance took it, or a PUT replaced it) is not
-- moved, but its runs are recorded all the same, and a run submitted under the lost lease
-- still becomes the schedule's last_submission_id when it is not older than the run of the
-- last submission there (so the next run's overlap policy sees it; a newer run's
-- submission, recorded by the instance that took over, is kept). Returns the schedules
-- moved. A run recorded already (a failed run retried) is replaced, but never a submitted
-- one. @submission_ids 0 keeps a schedule's last submission.
-- Citus: the coordinator's own tables.
WITH moved AS (
    UPDATE opsq.schedules s
    SET next_run_at = m.next_run_at, attempts = m.attempts, retry_at = m.retry_at,
        last_submission_id = coalesce(nullif(m.submission_id, 0), s.last_submission_id),
        lease_id = NULL, lease_until = NULL
    FROM unnest(@ids::bigint[], @next_run_ats::timestamptz[], @attempts::int[], @retry_ats::timestamptz[],
                @submission_ids::bigint[]) AS m(id, next_run_at, attempts, retry_at, submission_id)
    WHERE s.id = m.id AND s.lease_id = @lease_id
    RETURNING s.id
), noted AS (
    UPDATE opsq.schedules s SET last_submission_id = u.s
    FROM unnest(@run_schedules::bigint[], @run_times::timestamptz[], @run_outcomes::text[], @run_submissions::bigint[])
        AS u(id, t, o, s)
    WHERE s.id = u.id AND u.o = 'submitted' AND u.s <> 0 AND s.lease_id IS DISTINCT FROM @lease_id
      AND s.last_submission_id IS DISTINCT FROM u.s
      AND NOT EXISTS (SELECT FROM opsq.schedule_runs r
                      WHERE r.schedule_id = s.id AND r.submission_id = s.last_submission_id AND r.scheduled_at > u.t)
    RETURNING s.id
), recorded AS (
    INSERT INTO opsq.schedule_runs AS r (schedule_id, scheduled_at, outcome, submission_id, error, attempts)
    SELECT u.id, u.t, u.o, nullif(u.s, 0), u.e, u.a
    FROM unnest(@run_schedules::bigint[], @run_times::timestamptz[], @run_outcomes::text[], @run_submissions::bigint[],
                @run_errors::text[], @run_attempts::int[]) AS u(id, t, o, s, e, a)
    WHERE EXISTS (SELECT FROM opsq.schedules s WHERE s.id = u.id)
    ON CONFLICT (schedule_id, scheduled_at) DO UPDATE
    SET outcome = excluded.outcome, submission_id = excluded.submission_id, error = excluded.error,
        attempts = excluded.attempts, at = now()
    WHERE r.outcome <> 'submitted'
)
SELECT coalesce((SELECT array_agg(id) FROM moved), '{}') AS moved,
       coalesce((SELECT array_agg(id) FROM opsq.schedules WHERE id = ANY(@ids::bigint[])), '{}') AS kept
