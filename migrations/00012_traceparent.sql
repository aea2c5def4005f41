-- Trace context (DESIGN.md §9 Tracing): the W3C traceparent a producer sent with a
-- submission, handed out with each of its chunks so that a consumer's span joins the
-- producer's trace.
--
-- A side table keyed by submission id, like submission_lifecycle, rather than a column of
-- opsq.submissions: a submission's row moves between four tables as its state changes, and
-- a row here does not move with it. Only submissions sent with a traceparent have a row;
-- the reserve path reads it with the submission's other infos (one LEFT JOIN, on a miss of
-- its cache), and retention deletes it with the submission.

-- +goose Up
CREATE TABLE opsq.submission_traces (
    id          bigint PRIMARY KEY,
    traceparent text NOT NULL CHECK (length(traceparent) = 55)
);

-- +goose Down
DROP TABLE opsq.submission_traces;
