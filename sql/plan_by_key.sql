-- For the rest of the transaction, plan as statements that touch a few chunks by primary
-- key (a batch of completions): when the partitions are small (or their statistics stale)
-- the planner would rather read every partition. And plan each statement once per
-- connection: a custom plan of the complete statement, planned for every batch over every
-- chunk partition, cost a third of PostgreSQL's CPU in a burn-down (perf), and the generic
-- plan probes each chunk's own partition by run-time pruning as well.
SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL plan_cache_mode = force_generic_plan
