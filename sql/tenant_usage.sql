-- What a tenant has in progress: its submissions in progress and their chunks not yet
-- finished (pending, reserved or waiting), through submissions_tenant.
-- Citus: multi-shard read (U), aggregated on the coordinator.
SELECT count(*) AS in_progress,
       coalesce(sum(chunks_total - chunks_done - chunks_failed - chunks_skipped), 0)::bigint AS pending_chunks
FROM opsq.submissions
WHERE tenant = @tenant
