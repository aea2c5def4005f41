-- A retry of submission @id, in its transaction (the caller holds its lock), when it is a
-- child: it waits again while a parent is in progress, or, with policy completed, failed or
-- was cancelled (the re-check then cancels it again, naming that parent); it forgets the
-- parent that cancelled it. Returns whether it waits, and its parents (for the NOTIFY that
-- tells every instance they have a child waiting); no row for a submission that is no
-- child.
-- Citus: has a Citus form in layout.go (dependent_retry_citus.sql): Citus does not join the coordinator's submission_after and submission_parents to the distributed submissions here.
UPDATE opsq.submission_after a
SET waiting = EXISTS (
        SELECT FROM opsq.submission_parents p
        JOIN opsq.submission_status ps ON ps.id = p.parent
        WHERE p.child = a.id
          AND (ps.state = 'in_progress' OR a.policy = 'completed' AND ps.state IN ('failed', 'cancelled'))),
    cancelled_by = NULL, failure = NULL
WHERE a.id = @id
RETURNING a.waiting, (SELECT array_agg(p.parent ORDER BY p.position) FROM opsq.submission_parents p WHERE p.child = a.id) AS parents
