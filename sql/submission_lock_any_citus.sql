-- On Citus, submission_lock_any.sql as four router statements, one per table (Citus locks
-- rows only in a statement it routes, and does not route the four CTEs' UNION), sent in
-- one round trip; the first row found is the state. Same contract as there.
-- Citus: router (U, by @id), each.
SELECT 'in_progress'::text AS state, s.paused, 0::bigint AS unmoved
FROM opsq.submissions s WHERE s.id = @id::bigint FOR UPDATE
-- next statement
SELECT 'completed'::text AS state, false AS paused, 0::bigint AS unmoved
FROM opsq.submissions_completed s WHERE s.id = @id::bigint FOR UPDATE
-- next statement
SELECT 'failed'::text AS state, s.paused,
       (s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped)::bigint AS unmoved
FROM opsq.submissions_failed s WHERE s.id = @id::bigint FOR UPDATE
-- next statement
SELECT 'cancelled'::text AS state, s.paused,
       (s.chunks_total - s.chunks_done - s.chunks_failed - s.chunks_skipped)::bigint AS unmoved
FROM opsq.submissions_cancelled s WHERE s.id = @id::bigint FOR UPDATE
