-- The W3C traceparent a submission was sent with (migrations/00012_traceparent.sql).
-- Citus: router (U, by @id).
INSERT INTO opsq.submission_traces (id, traceparent) VALUES (@id, @traceparent)
