-- For the rest of the transaction, plan as statements that touch a few chunks by primary
-- key (a batch of completions): when the partitions are small (or their statistics stale)
-- the planner would rather read every partition.
SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off
