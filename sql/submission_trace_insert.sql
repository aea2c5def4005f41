-- The W3C traceparent a submission was sent with (migrations/00012_traceparent.sql).
INSERT INTO opsq.submission_traces (id, traceparent) VALUES (@id, @traceparent)
