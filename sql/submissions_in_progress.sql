-- Which of @ids are submissions still in progress (paused ones included): those in
-- opsq.submissions, which a submission leaves when it ends. The schedules' overlap
-- policies ask it of a batch of due schedules' previous submissions at once.
-- Citus: multi-shard on submissions (by id), a read of one primary-key entry per id.
SELECT id FROM opsq.submissions WHERE id = ANY(@ids::bigint[])
