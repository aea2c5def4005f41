-- A submission's lifecycle settings (migrations/00007_failures.sql), written with the
-- submission when any of them is not the default.
-- Citus: router (U, by @id).
INSERT INTO opsq.submission_lifecycle (id, on_failure, max_failed, backoff_initial_ms, backoff_factor, backoff_max_ms, not_before)
VALUES (@id, @on_failure::jsonb, @max_failed, @backoff_initial_ms, @backoff_factor, @backoff_max_ms, @not_before)
