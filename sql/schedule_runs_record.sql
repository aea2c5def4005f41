-- Records what runs of a schedule did (the arrays are parallel; submission 0 for none).
-- A run recorded again (a retry of a failed one, a trigger in the same second) takes the
-- new outcome, except that a submitted run stays submitted.
-- Citus: the coordinator's own tables.
INSERT INTO opsq.schedule_runs AS r (schedule_id, scheduled_at, outcome, submission_id, error, attempts)
SELECT @id, u.t, u.o, nullif(u.s, 0), u.e, u.a
FROM unnest(@times::timestamptz[], @outcomes::text[], @submissions::bigint[], @errors::text[], @attempts::int[])
    AS u(t, o, s, e, a)
ON CONFLICT (schedule_id, scheduled_at) DO UPDATE
SET outcome = excluded.outcome, submission_id = excluded.submission_id, error = excluded.error,
    attempts = excluded.attempts, at = now()
WHERE r.outcome <> 'submitted'
