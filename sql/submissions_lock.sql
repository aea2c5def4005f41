-- Lock a complete batch's submissions, in id order, so that concurrent batches (on other
-- instances) cannot deadlock on them; the ones still in progress come back, and
-- chunks_complete.sql, next in the same transaction, completes chunks of those only. A
-- statement of its own: when a row was just updated by another batch, PostgreSQL rechecks
-- it by starting the statement's plan afresh (EvalPlanQual), and for chunks_complete.sql
-- that meant every chunk partition's nodes (before migration 00026), on every batch that met another instance's
-- (perf of a burn-down: a tenth of PostgreSQL's CPU).
-- Citus: has a Citus form (layout.go): submission_lock_one.sql per id, in id order, router (U, by @id) each; as it is, a multi-shard FOR NO KEY UPDATE is refused.
SELECT id FROM opsq.submissions WHERE id = ANY(@ids::bigint[]) ORDER BY id FOR NO KEY UPDATE
