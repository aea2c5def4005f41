-- On Citus, chunks_complete.sql's "freed" and "freed_chunks": the max_simultaneous slots
-- of the batch's tokens and of every reservation of a chunk it completed. Skipped after
-- one probe when no reservation holds a slot, as there.
-- Citus: the coordinator's own table.
DELETE FROM opsq.simultaneous_holds h
WHERE EXISTS (SELECT FROM opsq.simultaneous_holds)
  AND (h.token = ANY(@tokens::text[])
       OR (h.submission_id, h.chunk_index) IN (
           SELECT unnest(@submission_ids::bigint[]), unnest(@chunk_indexes::int[])))
